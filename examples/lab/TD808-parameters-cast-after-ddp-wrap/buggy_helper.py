"""A DDP job that writes a compact half-precision checkpoint every few steps.

``save_half(ddp_model)`` casts the wrapped model to float16 to save it and back to
float32 after: the cast replaces the parameters' storage under DDP, whose gradient
buckets still point at the old tensors, so later steps are no longer all-reduced as
registered and the ranks drift apart.
"""

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def save_half(model: nn.Module, path: str) -> None:
    model.half()  # expect[lint]: TD808
    if dist.get_rank() == 0:
        torch.save(model.module.state_dict(), path)
    model.float()


def train(steps: int = 60) -> None:
    ddp_model = DDP(nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 5)))
    optimizer = torch.optim.SGD(ddp_model.parameters(), lr=0.05)
    for step in range(steps):
        inputs = torch.randn(16, 10)
        loss = nn.functional.mse_loss(ddp_model(inputs), inputs[:, :5])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 20 == 19:
            save_half(ddp_model, "compact.pt")


if __name__ == "__main__":
    dist.init_process_group("gloo")
    train()
    dist.destroy_process_group()
