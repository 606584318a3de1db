"""Parameter-efficient fine-tuning recipe: train only the normalisation
layers and the output layer of a small transformer-style encoder; the
trainable parameter names are selected by substring."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

TRAINABLE_KEYS = ("norm", "classifier")


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))

    def forward(self, x):
        return x + self.mlp(self.norm(x))


class Encoder(nn.Module):
    def __init__(self, d=32, n_classes=5):
        super().__init__()
        self.embed = nn.Linear(16, d)
        self.blocks = nn.Sequential(Block(d), Block(d))
        self.final_norm = nn.LayerNorm(d)
        self.classifier = nn.Linear(d, n_classes)

    def forward(self, x):
        return self.classifier(self.final_norm(self.blocks(self.embed(x))))


def make_data(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 16, generator=g)
    w = torch.randn(16, 5, generator=torch.Generator().manual_seed(4))
    return x, (x @ w).argmax(1)


def build():
    model = Encoder()
    for name, param in model.named_parameters():
        param.requires_grad = any(key in name for key in TRAINABLE_KEYS)
    loader = DataLoader(TensorDataset(*make_data(3000, seed=1)), batch_size=64, shuffle=True)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=5e-3)
    return model, loader, F.cross_entropy, optimizer


def main():
    torch.manual_seed(0)
    model, loader, loss_fn, optimizer = build()
    xv, yv = make_data(1000, seed=2)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    for epoch in range(4):
        model.train()
        for xb, yb in loader:
            optimizer.zero_grad()
            loss_fn(model(xb), yb).backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            acc = (model(xv).argmax(1) == yv).float().mean().item()
        print(f"epoch {epoch} val_acc={acc:.3f} trainable={trainable}/{total}")


if __name__ == "__main__":
    main()
