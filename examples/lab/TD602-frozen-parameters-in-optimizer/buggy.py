"""Fine-tuning a new head on a frozen feature extractor, with every parameter in AdamW.

The backbone is frozen with `requires_grad_(False)`, but the optimizer is built from
`model.parameters()`, so the frozen weights sit in its parameter groups. While their
`.grad` is None AdamW skips them; as soon as they hold a gradient tensor (unfrozen for a
while, or cleared with `zero_grad(set_to_none=False)`), weight decay and momentum move the
"frozen" backbone.
"""

import torch
from torch import nn

FEATURES = 32
CLASSES = 4


def make_model() -> nn.Module:
    backbone = nn.Sequential(nn.Linear(FEATURES, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU())
    return nn.Sequential(backbone, nn.Linear(64, CLASSES))


def make_batch(size: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    inputs = torch.randn(size, FEATURES, generator=generator)
    return inputs, inputs[:, :CLASSES].argmax(dim=1)


def make():
    torch.manual_seed(0)
    model = make_model()
    model[0].requires_grad_(False)  # keep the pretrained features
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.05)
    return model, make_batch(), nn.CrossEntropyLoss(), optimizer


def main() -> None:
    model, (inputs, labels), criterion, optimizer = make()
    for _step in range(30):
        optimizer.zero_grad()
        loss = criterion(model(inputs), labels)
        loss.backward()
        optimizer.step()
    print(f"loss after 30 steps: {loss.item():.3f}")


if __name__ == "__main__":
    main()
