"""A Lightning Fabric loop: fabric.backward replaces loss.backward, the rest is plain PyTorch."""

import torch
from lightning.fabric import Fabric
from torch import nn


def main() -> None:
    fabric = Fabric(accelerator="cpu", devices=1)
    fabric.seed_everything(0)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    model, optimizer = fabric.setup(model, optimizer)
    x = torch.randn(256, 8)
    data = torch.utils.data.TensorDataset(x, (x[:, 0] > 0).long())
    loader = fabric.setup_dataloaders(
        torch.utils.data.DataLoader(data, batch_size=32, shuffle=True)
    )
    for epoch in range(2):
        model.train()
        for inputs, labels in loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(inputs), labels)
            fabric.backward(loss)
            optimizer.step()
        fabric.print(f"epoch {epoch}: loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
