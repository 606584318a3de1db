"""Clipping between backward and step, by value for one group and by norm for all."""

import torch
from torch import nn


def main() -> None:
    torch.manual_seed(0)
    model = nn.LSTM(input_size=3, hidden_size=16, batch_first=True)
    head = nn.Linear(16, 1)
    params = list(model.parameters()) + list(head.parameters())
    optimizer = torch.optim.RMSprop(params, lr=1e-3)
    sequences = torch.randn(64, 20, 3)
    targets = sequences.sum(dim=(1, 2)).unsqueeze(1)
    for epoch in range(5):
        optimizer.zero_grad()
        output, _ = model(sequences)
        loss = nn.functional.mse_loss(head(output[:, -1]), targets)
        loss.backward()
        torch.nn.utils.clip_grad_value_(head.parameters(), clip_value=1.0)
        torch.nn.utils.clip_grad_norm_(params, max_norm=5.0)
        optimizer.step()
        print(f"epoch {epoch}: {loss.item():.3f}")


if __name__ == "__main__":
    main()
