"""The same fine-tuning with the optimizer built after the helpers swapped the layers."""

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.hidden = nn.Linear(8, 32)
        self.head = nn.Linear(32, classes)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.hidden(inputs)))

    def reset_classifier(self, classes: int) -> None:
        self.head = nn.Linear(32, classes)


def prune(model: Net, keep: int) -> None:
    def shrink(layer: nn.Linear, rows: torch.Tensor) -> nn.Linear:
        smaller = nn.Linear(layer.in_features, len(rows))
        with torch.no_grad():
            smaller.weight.copy_(layer.weight[rows])
            smaller.bias.copy_(layer.bias[rows])
        return smaller

    rows = model.hidden.weight.norm(dim=1).topk(keep).indices
    model.hidden = shrink(model.hidden, rows)
    model.head = nn.Linear(keep, model.head.out_features)


def make_optimizer(model: nn.Module) -> torch.optim.Optimizer:
    return torch.optim.SGD(model.parameters(), lr=0.1)


def main() -> None:
    torch.manual_seed(0)
    inputs = torch.randn(256, 8)
    labels = (inputs[:, 0] > 0).long() + (inputs[:, 1] > 0).long()
    model = Net()
    model.reset_classifier(3)
    prune(model, keep=16)
    optimizer = make_optimizer(model)
    head_before = model.head.weight.detach().clone()
    for _ in range(20):
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(inputs), labels).backward()
        optimizer.step()
    moved = (model.head.weight - head_before).abs().max().item()
    print(f"largest change of a head weight: {moved:.4f}")


if __name__ == "__main__":
    main()
