"""A compiled MLP classifier with a debugging check left in its forward pass.

`.item()` pulls a tensor's value into Python, which torch.compile cannot keep in a graph:
the forward pass is split in two graphs with Python in between, on every call.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 64), nn.GELU())
        self.head = nn.Linear(64, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.body(x)
        if h.abs().max().item() > 1e3:  # expect[run]: TD707
            print("activations are exploding")
        return self.head(h)


def main() -> None:
    torch.manual_seed(0)
    model = Classifier()
    compiled = torch.compile(model, backend="eager")  # "inductor" on a machine with a compiler
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = TensorDataset(torch.randn(512, 32), torch.randint(0, 4, (512,)))
    for epoch in range(2):
        for x, y in DataLoader(data, batch_size=64, shuffle=True, drop_last=True):
            loss = nn.functional.cross_entropy(compiled(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
