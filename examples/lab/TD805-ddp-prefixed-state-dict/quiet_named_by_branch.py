"""A trainer that wraps its model in DataParallel when asked, and names the model it saves
by the same test: `model.module` when wrapped, the model itself otherwise.

Every checkpoint holds the plain model's keys, with no `module.` prefix.
"""

import os
import tempfile

import torch
from torch import nn


def train(config: dict, model: nn.Module, folder: str) -> str:
    if config.get("parallel"):
        model = nn.DataParallel(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    path = os.path.join(folder, "epoch-last.pth")
    for epoch in range(2):
        x = torch.randn(16, 4)
        optimizer.zero_grad()
        nn.functional.mse_loss(model(x), x[:, :1]).backward()
        optimizer.step()
        if config.get("parallel"):
            model_ = model.module
        else:
            model_ = model
        torch.save({"epoch": epoch, "model_sd": model_.state_dict()}, path)
    return path


if __name__ == "__main__":
    torch.manual_seed(0)
    saved = train({"parallel": True}, nn.Linear(4, 1), tempfile.mkdtemp())
    print(sorted(torch.load(saved, weights_only=True)["model_sd"]))
