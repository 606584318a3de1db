"""Semantic segmentation: CrossEntropyLoss over [N, C, H, W] logits and [N, H, W] targets.

Pixels on the object boundary are labelled 255 and ignored with `ignore_index=255`, as in
Pascal VOC and Cityscapes; 255 is therefore not an out-of-range class.
"""

import torch
from torch import nn

CLASSES = 3
IGNORE = 255


class TinySegNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(),
                                     nn.Conv2d(16, 16, 3, padding=1), nn.ReLU())
        self.classifier = nn.Conv2d(16, CLASSES, 1)

    def forward(self, x):
        return self.classifier(self.encoder(x))


def make_batch(generator, size=8, side=16):
    """Two bright squares (class 1 and class 2) on background class 0; borders ignored."""
    images = 0.1 * torch.randn(size, 1, side, side, generator=generator)
    masks = torch.zeros(size, side, side, dtype=torch.long)
    for i in range(size):
        for cls, value in ((1, 1.0), (2, -1.0)):
            top, left = torch.randint(0, side - 6, (2,), generator=generator).tolist()
            images[i, 0, top:top + 6, left:left + 6] = value
            masks[i, top:top + 6, left:left + 6] = cls
    edges = torch.zeros_like(masks, dtype=torch.bool)
    edges[:, 1:, :] |= masks[:, 1:, :] != masks[:, :-1, :]
    edges[:, :, 1:] |= masks[:, :, 1:] != masks[:, :, :-1]
    masks[edges] = IGNORE
    return images, masks


def make():
    torch.manual_seed(0)
    model = TinySegNet()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    return model, make_batch(torch.Generator().manual_seed(22)), nn.CrossEntropyLoss(ignore_index=IGNORE), optimizer


def main():
    model, _, criterion, optimizer = make()
    generator = torch.Generator().manual_seed(23)
    for step in range(40):
        images, masks = make_batch(generator)
        optimizer.zero_grad()
        logits = model(images)
        loss = criterion(logits, masks)
        loss.backward()
        optimizer.step()
        if step % 10 == 0:
            with torch.no_grad():
                valid = masks != IGNORE
                probabilities = torch.softmax(logits, dim=1)
                confidence, predicted = probabilities.max(dim=1)
                accuracy = (predicted[valid] == masks[valid]).float().mean()
            print(f"step {step}: loss {loss.item():.4f} pixel acc {accuracy.item():.2%} "
                  f"mean confidence {confidence.mean().item():.2f}")


if __name__ == "__main__":
    main()
