"""A trainer that builds the optimizer, then wraps the model for data parallelism.

`DataParallel` (like `DistributedDataParallel`) keeps the wrapped module's own parameters,
so the optimizer built before the wrap still holds every parameter the model trains: the
attribute is rebound, but no layer is replaced.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

FEATURES = 12


class Trainer:
    def __init__(self, multi_gpu: bool) -> None:
        self.model = nn.Sequential(nn.Linear(FEATURES, 24), nn.ReLU(), nn.Linear(24, 1))
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.05)
        if multi_gpu:
            self.model = nn.DataParallel(self.model)

    def fit(self, loader: DataLoader, epochs: int) -> float:
        loss = torch.zeros(())
        for _ in range(epochs):
            for inputs, targets in loader:
                self.optimizer.zero_grad()
                loss = nn.functional.mse_loss(self.model(inputs), targets)
                loss.backward()
                self.optimizer.step()
        return loss.item()


def main() -> None:
    torch.manual_seed(0)
    inputs = torch.randn(256, FEATURES)
    targets = inputs[:, :3].sum(dim=1, keepdim=True)
    loader = DataLoader(TensorDataset(inputs, targets), batch_size=32, shuffle=True)
    trainer = Trainer(multi_gpu=True)
    print(f"final loss {trainer.fit(loader, epochs=3):.4f}")


if __name__ == "__main__":
    main()
