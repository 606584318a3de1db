"""A residual MLP block whose skip connection is added in place.

`tanh` saves its output for the backward pass; `out += x` then overwrites that output, and
`loss.backward()` dies of "one of the variables needed for gradient computation has been
modified by an inplace operation".
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class ResidualBlock(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.fc = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.tanh(self.fc(x))
        out += x
        return out


def main() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 32), ResidualBlock(32), ResidualBlock(32),
                          nn.Linear(32, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    data = TensorDataset(torch.randn(256, 10), torch.randn(256, 1))
    for epoch in range(3):
        for x, y in DataLoader(data, batch_size=32, shuffle=True):
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()  # expect[run]: TD220
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
