"""An epoch's average training loss, each batch mean scaled in place to its batch's sum.

As in pytorch-frame's examples: after ``backward()`` the batch's mean loss is multiplied
in place by the batch size (``loss *= len(y)``) and added, detached, to a tensor
accumulator, and the total is divided by the number of examples seen. The sum of the batch
sums over the example count is the true average, even with a smaller last batch.
"""

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def train(model: nn.Module, loader: DataLoader, optimizer: torch.optim.Optimizer) -> float:
    model.train()
    loss_accum = torch.zeros(1).squeeze_()
    total_count = 0
    for x, y in loader:
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total_count += len(y)
        loss *= len(y)
        loss_accum += loss.detach()
    return (loss_accum / total_count).item()


def main() -> None:
    torch.manual_seed(0)
    x = torch.randn(200, 6)
    y = x[:, :3].argmax(dim=1)
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)
    model = nn.Linear(6, 3)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        print(f"epoch {epoch}: loss {train(model, loader, optimizer):.4f}")


if __name__ == "__main__":
    main()
