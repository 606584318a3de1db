"""The classic MNIST-example structure: `log_softmax` in forward, `F.nll_loss` outside.

`nll_loss` expects log-probabilities, and the model returns exactly that; the test pass
sums the per-example NLL with `reduction="sum"` and counts correct predictions.
"""

import argparse

import torch
import torch.nn.functional as F
from torch import nn
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, 1)
        self.conv2 = nn.Conv2d(8, 16, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(16 * 5 * 5, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = self.dropout1(torch.flatten(x, 1))
        x = self.dropout2(F.relu(self.fc1(x)))
        return F.log_softmax(self.fc2(x), dim=1)


def fake_digits(n, seed):
    """Ten fixed 14x14 prototypes plus noise, standardised like MNIST's mean/std."""
    generator = torch.Generator().manual_seed(seed)
    prototypes = (torch.rand(10, 1, 14, 14, generator=torch.Generator().manual_seed(35)) > 0.7).float()
    labels = torch.randint(0, 10, (n,), generator=generator)
    images = prototypes[labels] + 0.3 * torch.randn(n, 1, 14, 14, generator=generator)
    return TensorDataset((images - 0.1307) / 0.3081, labels)


def train(model, loader, optimizer, epoch, log_interval):
    model.train()
    for batch_idx, (data, target) in enumerate(loader):
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        if batch_idx % log_interval == 0:
            print(f"train epoch {epoch} [{batch_idx * len(data)}/{len(loader.dataset)}] loss {loss.item():.4f}")


def test(model, loader):
    model.eval()
    test_loss, correct = 0.0, 0
    with torch.no_grad():
        for data, target in loader:
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction="sum").item()
            pred = output.argmax(dim=1, keepdim=True)
            correct += pred.eq(target.view_as(pred)).sum().item()
    print(f"test: average loss {test_loss / len(loader.dataset):.4f}, accuracy {correct}/{len(loader.dataset)}")


def make():
    torch.manual_seed(1)
    model = Net()
    return model, fake_digits(64, seed=36).tensors, F.nll_loss, torch.optim.Adadelta(model.parameters(), lr=1.0)


def main():
    parser = argparse.ArgumentParser(description="MNIST-style example on synthetic digits")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=1.0)
    parser.add_argument("--gamma", type=float, default=0.7)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--log-interval", type=int, default=5)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    train_loader = DataLoader(fake_digits(640, seed=37), batch_size=64, shuffle=True)
    test_loader = DataLoader(fake_digits(200, seed=38), batch_size=100)
    model = Net()
    optimizer = torch.optim.Adadelta(model.parameters(), lr=args.lr)
    scheduler = StepLR(optimizer, step_size=1, gamma=args.gamma)
    for epoch in range(1, args.epochs + 1):
        train(model, train_loader, optimizer, epoch, args.log_interval)
        test(model, test_loader)
        scheduler.step()


if __name__ == "__main__":
    main()
