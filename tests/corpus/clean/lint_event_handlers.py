"""Ignite-style training: the engine owns the loop, handlers are registered by decorator."""

import torch
from torch import nn


class Events:
    ITERATION_COMPLETED = "iteration_completed"
    EPOCH_COMPLETED = "epoch_completed"


class Engine:
    """A minimal event-driven engine (the shape of ignite's)."""

    def __init__(self, process_function):
        self.process_function = process_function
        self.handlers: dict[str, list] = {}
        self.state = {"epoch": 0, "iteration": 0, "output": None}

    def on(self, event):
        def register(handler):
            self.handlers.setdefault(event, []).append(handler)
            return handler

        return register

    def fire(self, event):
        for handler in self.handlers.get(event, []):
            handler(self)

    def run(self, loader, max_epochs):
        for _ in range(max_epochs):
            self.state["epoch"] += 1
            for batch in loader:
                self.state["iteration"] += 1
                self.state["output"] = self.process_function(self, batch)
                self.fire(Events.ITERATION_COMPLETED)
            self.fire(Events.EPOCH_COMPLETED)


def main() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.9)
    criterion = nn.MSELoss()

    def update(engine, batch):
        model.train()
        x, y = batch
        optimizer.zero_grad()
        loss = criterion(model(x).squeeze(-1), y)
        loss.backward()
        optimizer.step()
        return loss.item()

    trainer = Engine(update)

    @trainer.on(Events.EPOCH_COMPLETED)
    def step_scheduler(engine):
        scheduler.step()

    @trainer.on(Events.EPOCH_COMPLETED)
    def log_loss(engine):
        print(f"epoch {engine.state['epoch']}: last loss {engine.state['output']:.4f}")

    x = torch.randn(128, 6)
    data = torch.utils.data.TensorDataset(x, x.sum(dim=1))
    trainer.run(torch.utils.data.DataLoader(data, batch_size=16, shuffle=True), max_epochs=3)


if __name__ == "__main__":
    main()
