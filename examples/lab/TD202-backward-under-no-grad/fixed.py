"""The same training step with autograd on; only the evaluation runs under no_grad."""

import torch
from torch import nn
from torch.nn import functional as F


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


@torch.no_grad()
def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    model.eval()
    accuracy = (model(x).argmax(dim=1) == y).float().mean().item()
    model.train()
    return accuracy


def train_step(model: nn.Module, x: torch.Tensor, y: torch.Tensor,
               optimizer: torch.optim.Optimizer) -> float:
    optimizer.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.item()


def main() -> None:
    torch.manual_seed(0)
    x = torch.randn(600, 20)
    y = (x[:, :3].argmax(dim=1)).long()
    model = MLP()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for epoch in range(3):
        for start in range(0, 600, 50):
            loss = train_step(model, x[start:start + 50], y[start:start + 50], optimizer)
        print(f"epoch {epoch}: loss {loss:.3f}, accuracy {evaluate(model, x, y):.2%}")


if __name__ == "__main__":
    main()
