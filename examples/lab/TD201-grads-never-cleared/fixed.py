"""Fixed: the gradients are cleared once per step, before `backward()`."""

import torch
from torch import nn

FEATURES, CLASSES = 64, 10


def make_data(count: int = 3200) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    centres = torch.randn(CLASSES, FEATURES, generator=generator) * 2
    labels = torch.randint(0, CLASSES, (count,), generator=generator)
    return centres[labels] + torch.randn(count, FEATURES, generator=generator), labels


def main() -> None:
    torch.manual_seed(0)
    images, labels = make_data()
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(images, labels), batch_size=64, shuffle=True)
    model = nn.Sequential(nn.Linear(FEATURES, 128), nn.ReLU(), nn.Linear(128, CLASSES))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    for epoch in range(2):
        for x, y in loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
