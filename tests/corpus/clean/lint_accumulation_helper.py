"""Gradient accumulation: the loss is scaled in a helper, the optimizer steps every k batches."""

import torch
from torch import nn

ACCUMULATE = 4


def scaled_loss(
    criterion: nn.Module, output: torch.Tensor, target: torch.Tensor, steps: int
) -> torch.Tensor:
    return criterion(output, target) / steps


def main() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 32), nn.GELU(), nn.Linear(32, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    criterion = nn.CrossEntropyLoss()
    x = torch.randn(320, 12)
    data = torch.utils.data.TensorDataset(x, x[:, :3].argmax(dim=1))
    loader = torch.utils.data.DataLoader(data, batch_size=8, shuffle=True)
    for epoch in range(2):
        optimizer.zero_grad()
        for i, (inputs, targets) in enumerate(loader):
            loss = scaled_loss(criterion, model(inputs), targets, ACCUMULATE)
            loss.backward()
            if (i + 1) % ACCUMULATE == 0:
                optimizer.step()
                optimizer.zero_grad()
        print(f"epoch {epoch} done")


if __name__ == "__main__":
    main()
