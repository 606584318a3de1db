"""Gradients clipped after backward and the optimizer stepped after clipping, with a
learning-rate decay per epoch: a correct loop whose loss is noisy but falls."""

import torch
from torch import nn


def main():
    torch.manual_seed(0)
    x = torch.randn(512, 10)
    y = (x[:, :3].sum(1, keepdim=True) > 0).float()
    model = nn.Sequential(nn.Linear(10, 64), nn.Tanh(), nn.Linear(64, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.8)
    criterion = nn.BCEWithLogitsLoss()
    for epoch in range(4):
        for start in range(0, 512, 16):
            optimizer.zero_grad()
            loss = criterion(model(x[start:start + 16]), y[start:start + 16])
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
            optimizer.step()
        scheduler.step()
        print(f"epoch {epoch}: loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
