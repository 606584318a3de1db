"""A discriminator that learns which client a feature came from: its loader yields
one-hot client rows, read as class probabilities by CrossEntropyLoss (hence the float
cast) in training, and reduced with `argmax` when the accuracy is measured.

The float target is a soft (one-hot) target of shape (N, C), not class indices.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Server:
    def __init__(self, clients: int = 3) -> None:
        features = torch.randn(90, 8)
        owners = torch.arange(90) % clients
        rows = nn.functional.one_hot(owners, clients)
        self.feature_dataloader = DataLoader(TensorDataset(features, rows), batch_size=15)
        self.discriminator = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, clients))
        self.optimizer = torch.optim.SGD(self.discriminator.parameters(), lr=0.1)

    def train_discriminator(self) -> None:
        loss_func = nn.CrossEntropyLoss()
        for x, y in self.feature_dataloader:
            y = y.type(torch.float32)
            loss = loss_func(self.discriminator(x), y)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()

    def test_discriminator(self) -> float:
        correct = 0
        with torch.no_grad():
            for x, y in self.feature_dataloader:
                pred = torch.argmax(self.discriminator(x), dim=1)
                y = torch.argmax(y, dim=1)
                correct += int((pred == y).sum())
        return correct / 90


if __name__ == "__main__":
    torch.manual_seed(0)
    server = Server()
    for _ in range(5):
        server.train_discriminator()
    print(f"accuracy {server.test_discriminator():.2f}")
