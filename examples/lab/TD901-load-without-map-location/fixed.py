"""Trains on the GPU, saves CPU copies of the weights, and loads with map_location.

Either half of the fix is enough for the loading side: CPU copies make the file portable to
every machine, and `map_location` makes `torch.load` place the tensors where the loading
process wants them, whatever device saved them.
"""

import os
import tempfile

import torch
from torch import nn

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
LAB_SAVED_ON = "cuda:0"  # the device this program is meant to train on


def make_model() -> nn.Module:
    return nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 1))


def train(model: nn.Module, steps: int = 40) -> None:
    inputs = torch.randn(512, 16)
    targets = inputs[:, :4].sum(dim=1, keepdim=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    criterion = nn.MSELoss()
    for _ in range(steps):
        batch = torch.randint(0, 512, (64,))
        x, y = inputs[batch].to(DEVICE), targets[batch].to(DEVICE)
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()


def save_checkpoint(path: str) -> None:
    torch.manual_seed(0)
    model = make_model().to(DEVICE)
    train(model)
    torch.save({name: tensor.cpu() for name, tensor in model.state_dict().items()}, path)


def load_for_inference(path: str) -> nn.Module:
    model = make_model()
    model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    return model.eval()


def main() -> None:
    path = os.path.join(tempfile.gettempdir(), "td901-regressor-fixed.pt")
    save_checkpoint(path)
    model = load_for_inference(path)
    print("prediction:", model(torch.ones(1, 16)).item())


if __name__ == "__main__":
    main()
