"""A small trainer driven by event handlers: callbacks registered for `on_batch_end`
and `on_epoch_end` log, step a scheduler each epoch and keep the best weights."""

import copy

import torch
from torch import nn


class Trainer:
    def __init__(self, model, optimizer, loss_fn):
        self.model, self.optimizer, self.loss_fn = model, optimizer, loss_fn
        self.handlers = {"on_batch_end": [], "on_epoch_end": []}
        self.state = {"epoch": 0, "loss": None}

    def on(self, event):
        def register(handler):
            self.handlers[event].append(handler)
            return handler
        return register

    def fire(self, event):
        for handler in self.handlers[event]:
            handler(self.state)

    def run(self, batches, epochs):
        for epoch in range(epochs):
            self.state["epoch"] = epoch
            self.model.train()
            for x, y in batches:
                self.optimizer.zero_grad()
                loss = self.loss_fn(self.model(x), y)
                loss.backward()
                self.optimizer.step()
                self.state["loss"] = loss.item()
                self.fire("on_batch_end")
            self.fire("on_epoch_end")


def main():
    torch.manual_seed(0)
    x = torch.randn(256, 6)
    y = x @ torch.randn(6, 1) + 0.1
    batches = list(zip(x.split(32), y.split(32), strict=True))
    model = nn.Sequential(nn.Linear(6, 32), nn.ReLU(), nn.Linear(32, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    trainer = Trainer(model, optimizer, nn.MSELoss())
    scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.9)
    best = {"loss": float("inf"), "weights": None}

    @trainer.on("on_epoch_end")
    def step_scheduler(state):
        scheduler.step()

    @trainer.on("on_epoch_end")
    def keep_best(state):
        model.eval()
        with torch.no_grad():
            loss = nn.functional.mse_loss(model(x), y).item()
        if loss < best["loss"]:
            best["loss"], best["weights"] = loss, copy.deepcopy(model.state_dict())
        print(f"epoch {state['epoch']}: full-data loss {loss:.4f}")

    trainer.run(batches, epochs=6)
    model.load_state_dict(best["weights"])


if __name__ == "__main__":
    main()
