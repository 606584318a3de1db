"""An optimizer whose two groups are two slices of one parameter list.

All parameters but the last two (the classifier's weight and bias) go in the first group;
the last two get their own weight decay. The slices do not overlap, so no parameter is
given twice.
"""

import torch
from torch import nn


def main() -> None:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    optimizer = torch.optim.SGD(
        [
            {"params": list(net.parameters())[:-2]},
            {"params": list(net.parameters())[-2:], "weight_decay": 5e-4},
        ],
        lr=0.1,
    )
    x, y = torch.randn(16, 4), torch.randint(0, 3, (16,))
    for step in range(3):
        loss = nn.functional.cross_entropy(net(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"step {step}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
