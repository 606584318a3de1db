"""Truncated backpropagation through time that keeps every chunk's graph in its average.

Each chunk's `loss` is added into `chunk_loss`, the tensor backpropagated every `K` steps,
and also into `epoch_loss` for the report: `epoch_loss` holds every chunk's autograd graph
(activations included) until the epoch ends, so memory grows with the sequence length.
"""

import torch
from torch import nn

K = 5


def main() -> None:
    torch.manual_seed(0)
    cell = nn.RNNCell(3, 16)
    head = nn.Linear(16, 1)
    optimizer = torch.optim.Adam([*cell.parameters(), *head.parameters()], lr=1e-2)
    inputs, targets = torch.randn(40, 8, 3), torch.randn(40, 8, 1)
    for epoch in range(3):
        hidden = torch.zeros(8, 16)
        chunk_loss = 0.0
        epoch_loss = 0.0
        for step in range(inputs.shape[0]):
            hidden = cell(inputs[step], hidden)
            loss = nn.functional.mse_loss(head(hidden), targets[step])
            chunk_loss += loss
            epoch_loss += loss / inputs.shape[0]  # expect[lint]: TD205
            if step % K == K - 1:
                optimizer.zero_grad()
                chunk_loss.backward()
                optimizer.step()
                hidden = hidden.detach()
                chunk_loss = 0.0
        print(f"epoch {epoch}: loss {epoch_loss.item():.4f}")


if __name__ == "__main__":
    main()
