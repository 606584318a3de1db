"""Fine-tuning a pretrained backbone: the backbone is frozen, the new head trains."""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def pretrained_backbone() -> nn.Module:
    return nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU())


def main() -> None:
    torch.manual_seed(0)
    backbone = pretrained_backbone()
    for parameter in backbone.parameters():
        parameter.requires_grad = False
    model = nn.Sequential(backbone, nn.Linear(64, 3))
    optimizer = torch.optim.Adam((p for p in model.parameters() if p.requires_grad), lr=1e-3)
    data = TensorDataset(torch.randn(256, 20), torch.randint(0, 3, (256,)))
    for epoch in range(3):
        for x, y in DataLoader(data, batch_size=32, shuffle=True):
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
