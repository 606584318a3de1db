"""Fine-tuning a new head on a frozen encoder.

`requires_grad_(False)` clears the flag of every parameter of the encoder, so only the
head trains, in both styles.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def make_encoder() -> nn.Module:
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU())


def make_loader() -> DataLoader:
    data = TensorDataset(torch.randn(256, 16), torch.randint(0, 3, (256,)))
    return DataLoader(data, batch_size=32, shuffle=True)


def fine_tune_plain() -> float:
    encoder = make_encoder()
    encoder.requires_grad_(False)
    head = nn.Linear(32, 3)
    optimizer = torch.optim.SGD(head.parameters(), lr=0.1)
    loss = torch.zeros(())
    for x, y in make_loader():
        loss = nn.functional.cross_entropy(head(encoder(x)), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


class FineTuner(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = make_encoder()
        self.head = nn.Linear(32, 3)

    def freeze_encoder(self) -> None:
        self.encoder.requires_grad_(False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(x))


def fine_tune_module() -> float:
    model = FineTuner()
    model.freeze_encoder()
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.SGD(trainable, lr=0.1)
    loss = torch.zeros(())
    for x, y in make_loader():
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


def make():
    """For `torchdoctor check`: the fine-tuner as `fine_tune_module` builds it."""
    torch.manual_seed(0)
    model = FineTuner()
    model.freeze_encoder()
    trainable = [p for p in model.parameters() if p.requires_grad]
    return model, make_loader(), nn.CrossEntropyLoss(), torch.optim.SGD(trainable, lr=0.1)


def main() -> None:
    torch.manual_seed(0)
    print(f"plain: {fine_tune_plain():.3f}  module: {fine_tune_module():.3f}")


if __name__ == "__main__":
    main()
