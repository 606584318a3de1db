"""Image classifier with a step learning-rate schedule, stepped at the top of each epoch.

`scheduler.step()` runs before the first `optimizer.step()`: the first learning rate of
the schedule (0.1) is skipped, and every epoch trains with the next epoch's rate.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(512, 3, 8, 8), torch.randint(0, 10, (512,)))
    loader = DataLoader(data, batch_size=64, shuffle=True)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Flatten(),
                          nn.Linear(8 * 8 * 8, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    for epoch in range(3):
        scheduler.step()  # expect[lint,run]: TD607
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: lr {scheduler.get_last_lr()[0]:.3f} loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
