"""Personalised federated training in two phases with one optimizer over the whole
model: first the classifier alone (the base's gradients cleared), then the feature
extractor alone (the classifier's gradients cleared after backward).

Each `zero_grad()` between the backward and the step clears one part; the other part
runs in the same loop and keeps its gradients, so every step trains something.
"""

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.base = nn.Sequential(nn.Linear(8, 16), nn.ReLU())
        self.classifier = nn.Linear(16, 3)

    def get_last_features(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.base(x))


def fit(model: Net, batches: list[tuple[torch.Tensor, torch.Tensor]], rounds: int = 2) -> None:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    criterion = nn.CrossEntropyLoss()
    for epoch in range(2 * rounds):
        if epoch < rounds:
            for x, y in batches:
                loss = criterion(model(x), y)
                optimizer.zero_grad()
                loss.backward()
                model.base.zero_grad()
                optimizer.step()
        else:
            for x, y in batches:
                features = model.get_last_features(x)
                loss = criterion(model.classifier(features), y)
                optimizer.zero_grad()
                loss.backward()
                model.classifier.zero_grad()
                optimizer.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    net = Net()
    before = [p.detach().clone() for p in net.base.parameters()]
    fit(net, [(torch.randn(16, 8), torch.randint(0, 3, (16,))) for _ in range(4)])
    print("base trained:", any(not torch.equal(a, b) for a, b in zip(before, net.base.parameters())))
