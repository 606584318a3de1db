"""Image classifier with a step learning-rate schedule, stepped at the end of each epoch."""

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
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        scheduler.step()
        print(f"epoch {epoch}: lr {scheduler.get_last_lr()[0]:.3f} loss {loss.item():.3f}")


class Events:
    """The events of the tiny engine below (the shape of ignite's)."""

    EPOCH_STARTED = "epoch_started"
    EPOCH_COMPLETED = "epoch_completed"


class Engine:
    """Runs a step function over a loader and calls handlers around each epoch."""

    def __init__(self, step) -> None:
        self.step, self.handlers = step, {}

    def on(self, event: str):
        def register(handler):
            self.handlers.setdefault(event, []).append(handler)
            return handler
        return register

    def run(self, loader: DataLoader, epochs: int) -> None:
        for _ in range(epochs):
            for handler in self.handlers.get(Events.EPOCH_STARTED, []):
                handler(self)
            for batch in loader:
                self.step(self, batch)
            for handler in self.handlers.get(Events.EPOCH_COMPLETED, []):
                handler(self)


def train_with_handlers() -> float:
    """The same schedule, stepped from an event handler."""
    data = TensorDataset(torch.randn(512, 3, 8, 8), torch.randint(0, 10, (512,)))
    model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)

    def update(engine: Engine, batch: list[torch.Tensor]) -> None:
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(batch[0]), batch[1]).backward()
        optimizer.step()

    trainer = Engine(update)

    @trainer.on(Events.EPOCH_COMPLETED)
    def step_schedule(engine: Engine) -> None:
        scheduler.step()

    trainer.run(DataLoader(data, batch_size=64, shuffle=True), epochs=2)
    return scheduler.get_last_lr()[0]


if __name__ == "__main__":
    main()
