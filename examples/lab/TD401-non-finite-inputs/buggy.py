"""A machine-failure classifier on sensor logs where missing readings are stored as NaN.

One NaN in a batch makes that batch's loss NaN; its backward fills every gradient with
NaN and one optimizer step turns every weight into NaN. From then on every loss is NaN.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

SENSORS = 10


class FailureModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(SENSORS, 32), nn.ReLU(), nn.Linear(32, 2))

    def forward(self, readings: torch.Tensor) -> torch.Tensor:
        return self.body(readings)


def read_sensor_log(size: int = 512) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    readings = torch.randn(size, SENSORS, generator=generator)
    failed = (readings[:, 0] + readings[:, 3] > 1).long()
    dropped = torch.rand(size, SENSORS, generator=generator) < 0.02  # sensor offline
    readings[dropped] = float("nan")
    return readings, failed


def make():
    torch.manual_seed(0)
    readings, failed = read_sensor_log()
    loader = DataLoader(TensorDataset(readings, failed), batch_size=64, shuffle=True)
    model = FailureModel()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    return model, loader, nn.CrossEntropyLoss(), optimizer


def main() -> None:
    model, loader, criterion, optimizer = make()
    for epoch in range(3):
        for readings, failed in loader:
            optimizer.zero_grad()
            loss = criterion(model(readings), failed)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
