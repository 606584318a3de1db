"""A head warmed up on a frozen network, the rest of the model kept in eval mode.

Class-incremental learning adds a head for each new task and first trains it alone: the
optimizer holds the new head's parameters, and every epoch puts that head in train mode.
The evaluation at the end of the epoch calls ``model.eval()``, and nothing puts the rest
of the model back in train mode, on purpose: it is frozen, and eval mode keeps its
BatchNorm statistics fixed while the head learns.
"""

import torch
from torch import nn


class IncrementalNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(6, 16), nn.BatchNorm1d(16), nn.ReLU())
        self.heads = nn.ModuleList([nn.Linear(16, 3), nn.Linear(16, 2)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = self.body(x)
        return torch.cat([head(features) for head in self.heads], dim=1)


def main() -> None:
    torch.manual_seed(0)
    model = IncrementalNet()
    model.eval()  # the previous task ended with an evaluation
    batches = [(torch.randn(8, 6), torch.randint(3, 5, (8,))) for _ in range(3)]
    optimizer = torch.optim.SGD(model.heads[-1].parameters(), lr=0.1)
    for epoch in range(2):
        model.heads[-1].train()
        for x, y in batches:
            loss = nn.functional.cross_entropy(model(x)[:, 3:], y - 3)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            hits = sum((model(x)[:, 3:].argmax(1) + 3).eq(y).sum().item() for x, y in batches)
        print(f"epoch {epoch}: warm-up accuracy {hits / 24:.2f}")


if __name__ == "__main__":
    main()
