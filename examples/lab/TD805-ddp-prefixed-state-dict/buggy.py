"""DDP training that saves the wrapper's state_dict, so every key starts with "module.".

`DistributedDataParallel` keeps the real model in its `.module` attribute, and the wrapper's
own `state_dict()` names every weight `module.<name>`. Loading the file into the plain model,
for evaluation or fine-tuning on one device, fails with "Missing key(s) in state_dict:
"encoder.0.weight", ... Unexpected key(s) in state_dict: "module.encoder.0.weight", ...".
"""

import os
import tempfile

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU())
        self.head = nn.Linear(32, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(x))


def make_model() -> nn.Module:
    return Classifier()


def init_distributed() -> None:
    if "RANK" in os.environ:  # started by torchrun
        dist.init_process_group("gloo")
    else:  # plain `python buggy.py`: a group of one process
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)


def train(model: nn.Module, steps: int = 30) -> None:
    inputs = torch.randn(256, 10)
    targets = (inputs[:, 0] > 0).long() + (inputs[:, 1] > 0).long()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    for _ in range(steps):
        batch = torch.randint(0, 256, (32,))
        optimizer.zero_grad()
        loss = criterion(model(inputs[batch]), targets[batch])
        loss.backward()
        optimizer.step()


def save_checkpoint(path: str) -> None:
    init_distributed()
    torch.manual_seed(0)
    ddp_model = DDP(make_model())
    train(ddp_model)
    if dist.get_rank() == 0:
        torch.save(ddp_model.state_dict(), path)  # expect[lint]: TD805
    dist.destroy_process_group()


def main() -> None:
    path = os.path.join(tempfile.gettempdir(), "td805-classifier.pt")
    save_checkpoint(path)
    model = make_model()
    try:
        model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    except RuntimeError as error:
        print("loading into the plain model failed:", str(error).splitlines()[1][:100])


if __name__ == "__main__":
    main()
