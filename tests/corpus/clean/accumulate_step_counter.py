"""Gradient accumulation driven by a global step counter (`if step % k == 0:`).

The counter is incremented after every backward, so the optimizer steps once every
`ACCUMULATE` micro-batches. Gradients are reset in place (`set_to_none=False`) and clipped
before each step. SGD with Nesterov momentum.
"""

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

ACCUMULATE = 3
EPOCHS = 3


class TabularNet(nn.Module):
    def __init__(self, features: int, classes: int) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(features, 48), nn.GELU(), nn.Linear(48, 48), nn.GELU())
        self.out = nn.Linear(48, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.body(x))


def make_loader() -> DataLoader:
    generator = torch.Generator().manual_seed(2)
    x = torch.randn(240, 12, generator=generator)
    y = (x[:, :3].sum(dim=1) > 0).long() + (x[:, 3] > 0.5).long()
    return DataLoader(TensorDataset(x, y), batch_size=20, shuffle=True, drop_last=True)


def main() -> None:
    torch.manual_seed(0)
    loader = make_loader()
    model = TabularNet(12, 3)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True)

    step = 0
    optimizer.zero_grad(set_to_none=False)
    for epoch in range(EPOCHS):
        for x, y in loader:
            loss = F.cross_entropy(model(x), y) / ACCUMULATE
            loss.backward()
            step += 1
            if step % ACCUMULATE == 0:
                nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
                optimizer.step()
                optimizer.zero_grad(set_to_none=False)
        print(f"epoch {epoch}: optimizer steps so far {step // ACCUMULATE}, loss {loss.item() * ACCUMULATE:.3f}")


if __name__ == "__main__":
    main()
