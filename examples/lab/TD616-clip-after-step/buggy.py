"""A small recurrent regressor trained with gradient clipping, clipped one line too late.

`clip_grad_norm_` runs after `optimizer.step()`: the update has already used the raw
gradients, so the clipping protects nothing. The second trainer splits the step into
methods and makes the same mistake across them.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Regressor(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.rnn = nn.GRU(4, 16, batch_first=True)
        self.head = nn.Linear(16, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.rnn(x)
        return self.head(out[:, -1])


def make_loader() -> DataLoader:
    data = TensorDataset(torch.randn(256, 10, 4), torch.randn(256, 1))
    return DataLoader(data, batch_size=32, shuffle=True)


def train_plain(epochs: int = 2) -> float:
    model = Regressor()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loader = make_loader()
    loss = torch.zeros(())
    for _ in range(epochs):
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)  # expect: TD616
    return loss.item()


class Trainer:
    def __init__(self) -> None:
        self.model = Regressor()
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-3)

    def optimizer_step(self) -> None:
        self.optimizer.step()
        self.optimizer.zero_grad()

    def clip(self) -> None:
        nn.utils.clip_grad_norm_(self.model.parameters(), max_norm=1.0)  # expect: TD616

    def train_step(self, x: torch.Tensor, y: torch.Tensor) -> float:
        loss = nn.functional.mse_loss(self.model(x), y)
        loss.backward()
        self.optimizer_step()
        self.clip()
        return loss.item()

    def fit(self, epochs: int = 2) -> float:
        last = 0.0
        for _ in range(epochs):
            for x, y in make_loader():
                last = self.train_step(x, y)
        return last


def main() -> None:
    torch.manual_seed(0)
    print(f"plain: {train_plain():.3f}  trainer: {Trainer().fit():.3f}")


if __name__ == "__main__":
    main()
