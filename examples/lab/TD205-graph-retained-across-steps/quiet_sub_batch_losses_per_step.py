"""A training step that cuts its batch into sub-batches and keeps their losses to log.

Each batch is split into chunks; every chunk's loss is backpropagated and appended to
`losses`, a list made anew for the batch, and one optimizer step follows the chunks.
The list lives for that one step (its losses' graphs already freed by `backward()`),
is summed for the log line, and is replaced on the next batch: memory does not grow
from step to step.
"""

import torch
from torch import nn


def train(model, optimizer, loader, chunks: int) -> None:
    for step, (data, targets) in enumerate(loader):
        optimizer.zero_grad()
        losses = []
        for data_chunk, target_chunk in zip(data.chunk(chunks), targets.chunk(chunks), strict=True):
            loss = nn.functional.mse_loss(model(data_chunk), target_chunk) / chunks
            losses.append(loss)
            loss.backward()
        optimizer.step()
        if step % 2 == 0:
            print(f"step {step}: loss {sum(losses).item():.4f}")


def main() -> None:
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(4)]
    train(model, optimizer, loader, chunks=2)


if __name__ == "__main__":
    main()
