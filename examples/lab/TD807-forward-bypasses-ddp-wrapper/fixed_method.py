"""The prediction-method shape fixed: the training pass calls the DDP wrapper itself,
whose forward runs ``predict``, so DDP prepares the gradient all-reduce."""

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


class Head(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Linear(16, 4)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.predict(features)

    def predict(self, features: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.layer(features))


def train(steps: int = 20) -> None:
    head = DDP(Head())
    optimizer = torch.optim.SGD(head.parameters(), lr=0.1)
    for _ in range(steps):
        features, targets = torch.randn(8, 16), torch.randn(8, 4)
        predicted = head(features)
        loss = nn.functional.mse_loss(predicted, targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    dist.init_process_group("gloo")
    train()
    dist.destroy_process_group()
