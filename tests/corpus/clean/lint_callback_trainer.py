"""A home-made trainer with callbacks: the scheduler is stepped by a batch-end callback."""

import torch
from torch import nn


class Callback:
    def on_batch_end(self, trainer: "Trainer") -> None:
        """Called after every optimizer step."""

    def on_epoch_end(self, trainer: "Trainer") -> None:
        """Called after every epoch."""


class WarmupCosine(Callback):
    def __init__(self, optimizer: torch.optim.Optimizer, total_steps: int) -> None:
        self.scheduler = torch.optim.lr_scheduler.OneCycleLR(
            optimizer, max_lr=1e-2, total_steps=total_steps
        )

    def on_batch_end(self, trainer: "Trainer") -> None:
        self.scheduler.step()


class Printer(Callback):
    def on_epoch_end(self, trainer: "Trainer") -> None:
        print(f"epoch {trainer.epoch}: loss {trainer.last_loss:.3f}")


class Trainer:
    def __init__(
        self, model: nn.Module, optimizer: torch.optim.Optimizer, callbacks: list[Callback]
    ) -> None:
        self.model, self.optimizer, self.callbacks = model, optimizer, callbacks
        self.epoch, self.last_loss = 0, 0.0

    def fit(self, loader, epochs: int) -> None:
        for self.epoch in range(epochs):
            self.model.train()
            for x, y in loader:
                self.optimizer.zero_grad()
                loss = nn.functional.mse_loss(self.model(x), y)
                loss.backward()
                self.optimizer.step()
                self.last_loss = loss.item()
                for callback in self.callbacks:
                    callback.on_batch_end(self)
            for callback in self.callbacks:
                callback.on_epoch_end(self)


def main() -> None:
    torch.manual_seed(0)
    x = torch.randn(128, 4)
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(x, x.sum(1, True)), batch_size=16, shuffle=True
    )
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
    callbacks = [WarmupCosine(optimizer, total_steps=3 * len(loader)), Printer()]
    Trainer(model, optimizer, callbacks).fit(loader, epochs=3)


if __name__ == "__main__":
    main()
