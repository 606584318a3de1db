"""A Trainer class in the style of many research codebases.

State lives on `self`: model, optimizer, criterion, scheduler and GradScaler. `fit()`
alternates `train_epoch()` (sets `self.model.train()`) and `evaluate()` (sets
`self.model.eval()`, runs under `torch.inference_mode()`). Running metrics are kept as
detached tensors and read once per epoch.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


@dataclass
class Config:
    epochs: int = 3
    lr: float = 2e-3
    batch_size: int = 32
    grad_clip: float = 1.0


class Trainer:
    def __init__(self, model: nn.Module, config: Config) -> None:
        self.config = config
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self.model = model.to(self.device)
        self.criterion = nn.CrossEntropyLoss()
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=config.lr)
        self.scheduler = torch.optim.lr_scheduler.StepLR(self.optimizer, step_size=1, gamma=0.7)
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=self.device.type == "cuda")

    def train_step(self, inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        inputs, targets = inputs.to(self.device), targets.to(self.device)
        self.optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type=self.device.type, enabled=self.device.type == "cuda"):
            loss = self.criterion(self.model(inputs), targets)
        self.scaler.scale(loss).backward()
        self.scaler.unscale_(self.optimizer)
        nn.utils.clip_grad_norm_(self.model.parameters(), self.config.grad_clip)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        return loss.detach()

    def train_epoch(self, loader: DataLoader) -> float:
        self.model.train()
        running = torch.zeros((), device=self.device)
        for inputs, targets in loader:
            running += self.train_step(inputs, targets)
        self.scheduler.step()
        return (running / len(loader)).item()

    def evaluate(self, loader: DataLoader) -> float:
        self.model.eval()
        correct = torch.zeros((), dtype=torch.long, device=self.device)
        with torch.inference_mode():
            for inputs, targets in loader:
                inputs, targets = inputs.to(self.device), targets.to(self.device)
                correct += (self.model(inputs).argmax(dim=1) == targets).sum()
        return correct.item() / len(loader.dataset)

    def fit(self, train_loader: DataLoader, val_loader: DataLoader) -> None:
        for epoch in range(self.config.epochs):
            train_loss = self.train_epoch(train_loader)
            accuracy = self.evaluate(val_loader)
            print(f"epoch {epoch}: loss {train_loss:.4f} val acc {accuracy:.2%}")


def make_loaders(config: Config) -> tuple[DataLoader, DataLoader]:
    generator = torch.Generator().manual_seed(10)
    x = torch.randn(400, 16, generator=generator)
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).long()
    train = TensorDataset(x[:320], y[:320])
    val = TensorDataset(x[320:], y[320:])
    return (DataLoader(train, batch_size=config.batch_size, shuffle=True),
            DataLoader(val, batch_size=80))


def build_model() -> nn.Module:
    return nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, 2))


def make():
    torch.manual_seed(0)
    trainer = Trainer(build_model(), Config())
    loader, _ = make_loaders(Config())
    return trainer.model, loader, trainer.criterion, trainer.optimizer


def main() -> None:
    torch.manual_seed(0)
    config = Config()
    trainer = Trainer(build_model(), config)
    trainer.fit(*make_loaders(config))


if __name__ == "__main__":
    main()
