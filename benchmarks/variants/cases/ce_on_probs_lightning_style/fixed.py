"""Activity classification from accelerometer windows, written as a
Lightning-style module (training_step / validation_step /
configure_optimizers) driven by a small hand-written fit loop."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

N_CLASSES = 6


def make_windows(n, seed):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, N_CLASSES, (n,), generator=g)
    t = torch.linspace(0, 1, 32)
    freq = (2.0 + 0.25 * y.float()).unsqueeze(1)
    base = torch.sin(6.28 * freq * t) * (0.5 + 0.1 * y.float().unsqueeze(1))
    x = base.unsqueeze(1).repeat(1, 3, 1) + 1.5 * torch.randn(n, 3, 32, generator=g)
    return x, y


class ActivityModule(nn.Module):
    def __init__(self, lr=0.05):
        super().__init__()
        self.lr = lr
        self.features = nn.Sequential(nn.Conv1d(3, 16, 5, padding=2), nn.ReLU(),
                                      nn.AdaptiveAvgPool1d(8), nn.Flatten())
        self.classifier = nn.Linear(16 * 8, N_CLASSES)
        self.criterion = nn.CrossEntropyLoss()

    def forward(self, x):
        return self.classifier(self.features(x))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return self.criterion(self(x), y)

    def validation_step(self, batch, batch_idx):
        x, y = batch
        return (self(x).argmax(-1) == y).float().sum()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.lr, momentum=0.9)

    def train_dataloader(self):
        return DataLoader(TensorDataset(*make_windows(3000, seed=1)), batch_size=50, shuffle=True)

    def val_dataloader(self):
        return DataLoader(TensorDataset(*make_windows(1000, seed=2)), batch_size=250)


def fit(module, epochs):
    optimizer = module.configure_optimizers()
    train_loader, val_loader = module.train_dataloader(), module.val_dataloader()
    for epoch in range(epochs):
        module.train()
        for i, batch in enumerate(train_loader):
            optimizer.zero_grad()
            loss = module.training_step(batch, i)
            loss.backward()
            optimizer.step()
        module.eval()
        with torch.no_grad():
            correct = sum(module.validation_step(b, i).item() for i, b in enumerate(val_loader))
        print(f"epoch {epoch} last_loss={loss.item():.4f} val_acc={correct / len(val_loader.dataset):.3f}")


def main():
    torch.manual_seed(0)
    fit(ActivityModule(), epochs=4)


if __name__ == "__main__":
    main()
