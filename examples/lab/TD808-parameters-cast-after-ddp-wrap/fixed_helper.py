"""The compact-checkpoint helper fixed: it casts a copy of the weights, never the
parameters DDP registered."""

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def save_half(model: nn.Module, path: str) -> None:
    if dist.get_rank() == 0:
        state = {key: value.detach().half() for key, value in model.module.state_dict().items()}
        torch.save(state, path)


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
