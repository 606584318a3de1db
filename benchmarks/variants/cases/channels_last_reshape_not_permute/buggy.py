"""Colour-blob classifier. The image store holds frames channels-last
(N, H, W, C), as image decoders return them; the batch is converted to
the (N, C, H, W) layout Conv2d expects before the forward pass."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

H = W = 16
PALETTE = torch.tensor([[0.9, 0.2, 0.2], [0.2, 0.9, 0.2], [0.2, 0.2, 0.9], [0.9, 0.9, 0.2]])


def make_frames(n, seed):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, len(PALETTE), (n,), generator=g)
    frames = 0.5 + 0.15 * torch.randn(n, H, W, 3, generator=g)
    r = torch.randint(0, H - 5, (n,), generator=g)
    c = torch.randint(0, W - 5, (n,), generator=g)
    for i in range(n):
        frames[i, r[i]:r[i] + 5, c[i]:c[i] + 5] = PALETTE[y[i]] + 0.1 * torch.randn(5, 5, 3, generator=g)
    return frames, y


def to_nchw(frames):
    n, h, w, ch = frames.shape
    return frames.reshape(n, ch, h, w)


class BlobNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc = nn.Linear(32, len(PALETTE))

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.relu(self.conv2(x))
        return self.fc(x.amax(dim=(2, 3)))


def main():
    torch.manual_seed(0)
    loader = DataLoader(TensorDataset(*make_frames(2000, seed=1)), batch_size=32, shuffle=True)
    xv, yv = make_frames(500, seed=2)
    model = BlobNet()
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    for epoch in range(3):
        model.train()
        for frames, yb in loader:
            optimizer.zero_grad()
            F.cross_entropy(model(to_nchw(frames)), yb).backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            acc = (model(to_nchw(xv)).argmax(1) == yv).float().mean().item()
        print(f"epoch {epoch} val_acc={acc:.3f}")


if __name__ == "__main__":
    main()
