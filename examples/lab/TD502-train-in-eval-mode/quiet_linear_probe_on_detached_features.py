"""A linear stage that trains heads on detached features of a backbone kept in eval mode.

The backbone is trained first, with its own optimizer. In the linear stage every step puts
it in eval mode and detaches its features: no gradient reaches it, and its BatchNorm
statistics stay fixed. Only the linear heads learn, so eval mode is what the backbone
needs there.
"""

import torch
from torch import nn


class Backbone(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(6, 16), nn.BatchNorm1d(16), nn.ReLU())

    def forward(self, x: torch.Tensor, return_feature: bool = False):
        features = self.body(x)
        return (features.sum(1), features) if return_feature else features.sum(1)


def main() -> None:
    torch.manual_seed(0)
    net = Backbone()
    heads = nn.Linear(16, 3)
    batches = [(torch.randn(8, 6), torch.randint(0, 3, (8,))) for _ in range(3)]
    pretrain = torch.optim.SGD(net.parameters(), lr=0.1)
    net.train()
    for images, _ in batches:
        loss = net(images).pow(2).mean()
        pretrain.zero_grad()
        loss.backward()
        pretrain.step()
    optimizer = torch.optim.SGD(heads.parameters(), lr=0.1)
    for step, (images, labels) in enumerate(batches):
        net.eval()
        _, features = net(images, return_feature=True)
        penultimate = features.detach()
        loss = nn.functional.cross_entropy(heads(penultimate), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"step {step}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
