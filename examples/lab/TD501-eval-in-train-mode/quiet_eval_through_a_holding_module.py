"""An anomaly-detection method whose training step is an nn.Module built from the network.

`_Step` keeps the network as its child (`self.net = net`), so `self.model.eval()` in
`prediction()` puts the network in eval mode too: the dropout is off when the loop
evaluates `self.net`, and nothing is reported.
"""

import torch
from torch import nn


class _Step(nn.Module):
    def __init__(self, net: nn.Module, optimizer: torch.optim.Optimizer) -> None:
        super().__init__()
        self.net = net
        self.optimizer = optimizer

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> float:
        self.optimizer.zero_grad()
        loss = nn.functional.cross_entropy(self.net(x), y)
        loss.backward()
        self.optimizer.step()
        return loss.item()


class Method:
    def __init__(self) -> None:
        torch.manual_seed(0)
        self.net = nn.Sequential(nn.Linear(8, 16), nn.Dropout(0.5), nn.Linear(16, 2))
        self.optimizer = torch.optim.SGD(self.net.parameters(), lr=0.1)
        self.model = _Step(self.net, self.optimizer).to("cpu")

    def train_model(self, batches: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        self.model.train()
        for x, y in batches:
            self.model(x, y)

    def prediction(self, batches: list[torch.Tensor]) -> list[torch.Tensor]:
        self.model.eval()
        assert not self.net.training  # the child follows its holder
        predictions = []
        with torch.no_grad():
            for x in batches:
                predictions.append(self.net(x).argmax(dim=1))
        return predictions


if __name__ == "__main__":
    method = Method()
    method.train_model([(torch.randn(16, 8), torch.randint(0, 2, (16,))) for _ in range(5)])
    print(method.prediction([torch.randn(4, 8) for _ in range(3)]))
