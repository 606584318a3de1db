"""A trainer whose `validate()` remembers the best weights, restored once `fit()` ends.

`validate()` runs after every epoch of `fit()` and, when the loss improves, keeps
`self.model.state_dict()` on the trainer. The dict shares the model's live tensors: the
epochs after it go on changing them, so the weights `fit()` restores after its loop (and
`save_best()` writes) are the last ones, not the best.
"""

import os
import tempfile

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Trainer:
    def __init__(self, model: nn.Module, loader: DataLoader, val: tuple[torch.Tensor, torch.Tensor]) -> None:
        self.model = model
        self.loader = loader
        self.val = val
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
        self.best_loss = float("inf")
        self.best_weights: dict[str, torch.Tensor] = {}

    def fit(self, epochs: int) -> None:
        for epoch in range(epochs):
            for group in self.optimizer.param_groups:  # late epochs overshoot
                group["lr"] = 0.05 if epoch < epochs // 2 else 0.4
            for x, y in self.loader:
                self.optimizer.zero_grad()
                nn.functional.mse_loss(self.model(x), y).backward()
                self.optimizer.step()
            loss = self.validate()
            print(f"epoch {epoch}: validation loss {loss:.4f}")
        self.model.load_state_dict(self.best_weights)  # expect[run]: TD912

    def validate(self) -> float:
        with torch.no_grad():
            loss = nn.functional.mse_loss(self.model(self.val[0]), self.val[1]).item()
        if loss < self.best_loss:
            self.best_loss = loss
            self.best_weights = self.model.state_dict()  # expect[lint]: TD912
        return loss

    def save_best(self, path: str) -> None:
        torch.save(self.best_weights, path)


def main() -> None:
    torch.manual_seed(0)
    inputs = torch.randn(256, 6)
    targets = inputs.sum(dim=1, keepdim=True) + 0.1 * torch.randn(256, 1)
    loader = DataLoader(TensorDataset(inputs[:192], targets[:192]), batch_size=32, shuffle=True)
    trainer = Trainer(nn.Linear(6, 1), loader, (inputs[192:], targets[192:]))
    trainer.fit(8)
    trainer.save_best(os.path.join(tempfile.mkdtemp(), "best.pt"))
    with torch.no_grad():
        restored = nn.functional.mse_loss(trainer.model(inputs[192:]), targets[192:]).item()
    print(f"best {trainer.best_loss:.4f}, restored {restored:.4f}")


if __name__ == "__main__":
    main()
