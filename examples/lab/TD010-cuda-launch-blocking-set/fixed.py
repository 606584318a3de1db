"""The same script without CUDA_LAUNCH_BLOCKING: kernels launch asynchronously again.

To locate a failing kernel, set the variable for that one debugging run from the shell
(`CUDA_LAUNCH_BLOCKING=1 python train.py`), not in the script.
"""

import torch
from torch import nn


def configure() -> None:
    torch.manual_seed(0)


def main() -> None:
    configure()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    criterion = nn.CrossEntropyLoss()
    inputs, targets = torch.randn(512, 32), torch.randint(0, 10, (512,))
    for start in range(0, 512, 64):
        x, y = inputs[start:start + 64].to(device), targets[start:start + 64].to(device)
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
    print(f"loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
