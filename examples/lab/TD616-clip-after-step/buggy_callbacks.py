"""A small trainer that runs its extras as callbacks, dispatched by event name.

Clipping was added as one more callback, on the ``on_batch_end`` event, which the trainer
emits after ``optimizer.step()``: the step has already applied the unclipped gradients,
and the next batch clears them, so the clip protects nothing.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class ClipGradients:
    def __init__(self, max_norm: float) -> None:
        self.max_norm = max_norm

    def on_batch_end(self, trainer: "Trainer") -> None:
        nn.utils.clip_grad_norm_(trainer.model.parameters(), self.max_norm)  # expect[lint,run]: TD616


class PrintLoss:
    def on_batch_end(self, trainer: "Trainer") -> None:
        trainer.seen += 1


class Trainer:
    def __init__(self, model: nn.Module, callbacks: list[object]) -> None:
        self.model = model
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
        self.callbacks = callbacks
        self.seen = 0

    def _emit(self, event: str) -> None:
        for callback in self.callbacks:
            getattr(callback, event)(self)

    def train_batch(self, inputs: torch.Tensor, targets: torch.Tensor) -> None:
        self.optimizer.zero_grad()
        nn.functional.mse_loss(self.model(inputs), targets).backward()
        self.optimizer.step()
        self._emit("on_batch_end")

    def fit(self, loader: DataLoader, epochs: int) -> None:
        for _ in range(epochs):
            for inputs, targets in loader:
                self.train_batch(inputs, targets)


if __name__ == "__main__":
    torch.manual_seed(0)
    inputs = torch.randn(256, 8)
    data = TensorDataset(inputs, inputs.sum(dim=1, keepdim=True) * 25)
    trainer = Trainer(nn.Linear(8, 1), [ClipGradients(1.0), PrintLoss()])
    trainer.fit(DataLoader(data, batch_size=32, shuffle=True), epochs=2)
    print(f"batches: {trainer.seen}")
