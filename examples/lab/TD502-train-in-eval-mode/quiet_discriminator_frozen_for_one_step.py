"""Adversarial domain adaptation whose discriminator is frozen for the generator's step.

Every iteration puts the discriminator in eval mode while the segmenter learns to fool
it (its BatchNorm statistics must not move towards the target images then), and puts it
back in train mode for its own update a few lines later. The eval mode is scoped to that
one forward on purpose; nothing is left in eval mode for training.
"""

import torch
from torch import nn


def main() -> None:
    torch.manual_seed(0)
    segmenter = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 4, 1))
    discriminator = nn.Sequential(
        nn.Conv2d(4, 8, 3, stride=2), nn.BatchNorm2d(8), nn.LeakyReLU(0.2), nn.Conv2d(8, 1, 3)
    )
    optimizer = torch.optim.SGD(segmenter.parameters(), lr=0.01, momentum=0.9)
    optimizer_d = torch.optim.Adam(discriminator.parameters(), lr=1e-4)
    bce = nn.BCEWithLogitsLoss()
    segmenter.train()
    for step in range(4):
        source, labels = torch.randn(2, 3, 16, 16), torch.randint(0, 4, (2, 16, 16))
        target = torch.randn(2, 3, 16, 16)
        optimizer.zero_grad()
        optimizer_d.zero_grad()

        discriminator.eval()  # frozen while the segmenter trains against it
        loss_seg = nn.functional.cross_entropy(segmenter(source), labels)
        loss_seg.backward()
        pred_t = segmenter(target)
        d_out = discriminator(pred_t.softmax(1))
        loss_adv = bce(d_out, torch.ones_like(d_out))
        loss_adv.backward()

        discriminator.train()
        d_s = discriminator(segmenter(source).detach().softmax(1))
        d_t = discriminator(pred_t.detach().softmax(1))
        loss_d = bce(d_s, torch.ones_like(d_s)) + bce(d_t, torch.zeros_like(d_t))
        loss_d.backward()
        optimizer.step()
        optimizer_d.step()
        print(f"step {step}: seg {loss_seg.item():.3f} adv {loss_adv.item():.3f} d {loss_d.item():.3f}")


if __name__ == "__main__":
    main()
