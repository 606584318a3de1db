"""A small CNN written for 28x28 MNIST digits, trained on 32x32 CIFAR-sized images.

The classifier's input size is hard-coded as 16 * 7 * 7; on 32x32 images the feature map
is 16 x 8 x 8, and the first forward pass dies of "mat1 and mat2 shapes cannot be
multiplied (64x1024 and 784x10)".
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class SmallCNN(nn.Module):
    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        )
        self.classifier = nn.Linear(16 * 7 * 7, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x).flatten(1)
        return self.classifier(x)  # expect[run]: TD108


def main() -> None:
    torch.manual_seed(0)
    images, labels = torch.randn(256, 3, 32, 32), torch.randint(0, 10, (256,))
    loader = DataLoader(TensorDataset(images, labels), batch_size=64, shuffle=True)
    model = SmallCNN()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for epoch in range(2):
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
