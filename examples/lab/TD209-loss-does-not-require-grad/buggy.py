"""Fine-tuning a pretrained backbone with a new head, frozen in the wrong order.

The new head is attached first and the whole model is frozen afterwards, so no parameter
requires grad, the loss has no graph, and `loss.backward()` dies of "element 0 of tensors
does not require grad and does not have a grad_fn".
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def pretrained_backbone() -> nn.Module:
    return nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU())


def main() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(pretrained_backbone(), nn.Linear(64, 3))
    for parameter in model.parameters():  # meant to freeze the backbone only
        parameter.requires_grad = False
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    data = TensorDataset(torch.randn(256, 20), torch.randint(0, 3, (256,)))
    for epoch in range(3):
        for x, y in DataLoader(data, batch_size=32, shuffle=True):
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()  # expect[run]: TD209
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
