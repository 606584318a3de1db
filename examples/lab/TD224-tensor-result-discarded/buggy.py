"""Moving and converting batches without keeping the result.

A tensor's `.to()`, `.float()` and `.detach()` return new tensors: called as statements
they change nothing. The batch stays int64 and the running statistic keeps its graph.
The second style does the same in a `prepare()` helper and a trainer method.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def make_loader() -> DataLoader:
    data = TensorDataset(torch.randint(0, 255, (128, 16)), torch.randn(128, 1))
    return DataLoader(data, batch_size=32, shuffle=True)


def train_plain(device: str = "cpu") -> float:
    model = nn.Linear(16, 1).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-5)
    loss = torch.zeros(())
    for x, y in make_loader():
        x.float()  # expect: TD224
        x = x.float()
        y.to(device)  # expect: TD224
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


def prepare(batch: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    scale.detach()  # expect: TD224
    return batch.float() / scale


def train_helpers() -> float:
    model = nn.Linear(16, 1)
    scale = torch.tensor(255.0)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
    loss = torch.zeros(())
    for x, y in make_loader():
        loss = nn.functional.mse_loss(model(prepare(x, scale)), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


def main() -> None:
    torch.manual_seed(0)
    print(f"plain: {train_plain():.3f}  helpers: {train_helpers():.3f}")


if __name__ == "__main__":
    main()
