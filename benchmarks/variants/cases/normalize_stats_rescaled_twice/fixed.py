"""Small CNN on synthetic 8-bit RGB textures. The dataset converts uint8
pixels to [0, 1] floats and then standardises them with per-channel
statistics, as a torchvision-style Compose([ToTensor(), Normalize()])
pipeline does."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

CHANNEL_MEAN = [0.507, 0.487, 0.441]
CHANNEL_STD = [0.267, 0.256, 0.276]


def make_textures(n, seed):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 4, (n,), generator=g)
    xs = torch.linspace(0, 6.283, 16)
    freq = (1 + y).float().view(n, 1, 1, 1)
    wave = torch.sin(freq * xs.view(1, 1, 1, 16) + torch.rand(n, 1, 1, 1, generator=g) * 6.283)
    img = 128 + 60 * wave.expand(n, 3, 16, 16) + 40 * torch.randn(n, 3, 16, 16, generator=g)
    return img.clamp(0, 255).to(torch.uint8), y


class Normalize:
    def __init__(self, mean, std):
        self.mean = torch.tensor(mean).view(3, 1, 1)
        self.std = torch.tensor(std).view(3, 1, 1)

    def __call__(self, img):
        return (img - self.mean) / self.std


class TextureSet(Dataset):
    def __init__(self, n, seed):
        self.images, self.labels = make_textures(n, seed)
        self.normalize = Normalize(mean=CHANNEL_MEAN, std=CHANNEL_STD)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        img = self.images[i].float() / 255.0
        return self.normalize(img), self.labels[i]


def main():
    torch.manual_seed(0)
    loader = DataLoader(TextureSet(2000, seed=1), batch_size=32, shuffle=True)
    val = TextureSet(500, seed=2)
    xv = torch.stack([val[i][0] for i in range(len(val))])
    yv = val.labels
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(),
                          nn.AdaptiveAvgPool2d((1, 4)), nn.Flatten(), nn.Linear(64, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    for epoch in range(3):
        model.train()
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            acc = (model(xv).argmax(1) == yv).float().mean().item()
        print(f"epoch {epoch} loss={loss.item():.4f} val_acc={acc:.3f} input_std={xv.std().item():.1f}")


if __name__ == "__main__":
    main()
