"""A linear SVM trained with the hinge loss on separable data, until the loss is zero.

`F.relu(1 - y * score)` is the hinge: once every example is outside the margin the loss
is exactly 0.0 and every gradient is exactly zero, so the remaining optimizer steps change
nothing. That is convergence, not a stuck run: the loop simply runs its fixed number of
epochs, as most scripts do.
"""

import torch
import torch.nn.functional as F
from torch import nn


def separable_data(n=200, seed=51):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 2, generator=generator)
    y = torch.where(x[:, 0] + x[:, 1] > 0, 1.0, -1.0)
    x = x + 0.5 * y.unsqueeze(1)  # push the classes apart: a margin exists
    return x, y


def hinge_loss(scores, labels):
    return F.relu(1.0 - labels * scores.squeeze(1)).mean()


def make():
    torch.manual_seed(0)
    model = nn.Linear(2, 1)
    return model, separable_data(64), hinge_loss, torch.optim.SGD(model.parameters(), lr=0.1)


def main():
    torch.manual_seed(0)
    x, y = separable_data()
    model = nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(200):
        optimizer.zero_grad()
        loss = hinge_loss(model(x), y)
        loss.backward()
        optimizer.step()
        if epoch % 20 == 0:
            print(f"epoch {epoch}: hinge loss {loss.item():.4f}")
    accuracy = (torch.sign(model(x).squeeze(1)) == y).float().mean()
    print(f"final loss {loss.item():.4f}, training accuracy {accuracy.item():.2%}")


if __name__ == "__main__":
    main()
