"""A trainer that remembers its best weights in an attribute and restores them on demand.

`self.best_state = self.model.state_dict()` is taken when validation improves, and
`restore_best()` loads it: but the snapshot shares the live tensors, so by the time it is
restored every later step has changed it, and the trainer restores its last weights.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Trainer:
    def __init__(self, model: nn.Module, loader: DataLoader, val: tuple[torch.Tensor, torch.Tensor]) -> None:
        self.model = model
        self.loader = loader
        self.val = val
        self.optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
        self.best_loss = float("inf")
        self.best_state: dict[str, torch.Tensor] = {}

    def fit(self, epochs: int) -> None:
        for epoch in range(epochs):
            for group in self.optimizer.param_groups:  # late epochs overshoot
                group["lr"] = 5e-2 if epoch < epochs // 2 else 3.0
            self.train_epoch()
            loss = self.validate()
            if loss < self.best_loss:
                self.best_loss = loss
                self.best_state = self.model.state_dict()  # expect[lint]: TD912
            print(f"epoch {epoch}: validation loss {loss:.4f}")

    def train_epoch(self) -> None:
        for x, y in self.loader:
            self.optimizer.zero_grad()
            nn.functional.mse_loss(self.model(x), y).backward()
            self.optimizer.step()

    def validate(self) -> float:
        with torch.no_grad():
            return nn.functional.mse_loss(self.model(self.val[0]), self.val[1]).item()

    def restore_best(self) -> None:
        self.model.load_state_dict(self.best_state)  # expect[run]: TD912


def main() -> None:
    torch.manual_seed(0)
    inputs = torch.randn(256, 6)
    targets = inputs.sum(dim=1, keepdim=True) + 0.1 * torch.randn(256, 1)
    loader = DataLoader(TensorDataset(inputs[:192], targets[:192]), batch_size=32, shuffle=True)
    trainer = Trainer(nn.Linear(6, 1), loader, (inputs[192:], targets[192:]))
    trainer.fit(6)
    trainer.restore_best()
    print(f"best {trainer.best_loss:.4f}, restored {trainer.validate():.4f}")


if __name__ == "__main__":
    main()
