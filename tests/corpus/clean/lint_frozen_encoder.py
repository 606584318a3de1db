"""Fine-tune a head on a frozen encoder: requires_grad_ on the parameters, eval() on the encoder."""

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(12, 48), nn.BatchNorm1d(48), nn.ReLU())
        self.head = nn.Linear(48, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(x))

    def freeze_encoder(self) -> None:
        for parameter in self.encoder.parameters():
            parameter.requires_grad_(False)
        self.encoder.eval()

    def train(self, mode: bool = True) -> "Model":
        super().train(mode)
        self.encoder.eval()  # keep the frozen BatchNorm statistics
        return self


def main() -> None:
    torch.manual_seed(0)
    model = Model()
    model.freeze_encoder()
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.SGD(trainable, lr=0.1)
    x = torch.randn(128, 12)
    y = x[:, :3].argmax(dim=1)
    model.train()
    for _ in range(20):
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
    print("head trained")


if __name__ == "__main__":
    main()
