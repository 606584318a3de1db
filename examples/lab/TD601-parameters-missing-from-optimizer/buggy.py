"""A small Transformer-style classifier whose optimizer groups are assembled by name.

The usual recipe gives weights weight decay and biases none. Here the decay group takes
names ending in "weight" except norm layers, and the no-decay group takes names ending in
"bias": the LayerNorm weights (`norm.weight`) fit neither filter, so they are in no group.
They receive gradients every step and never change from their initial 1.0.
"""

import torch
from torch import nn

FEATURES = 24
CLASSES = 3


class Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 2 * width), nn.GELU(),
                                 nn.Linear(2 * width, width))

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return inputs + self.mlp(self.norm(inputs))


class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(FEATURES, 32)
        self.blocks = nn.Sequential(Block(32), Block(32))
        self.head = nn.Linear(32, CLASSES)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(self.embed(inputs)))


def make_batch(size: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    inputs = torch.randn(size, FEATURES, generator=generator)
    return inputs, (inputs[:, :CLASSES] * 2).argmax(dim=1)


def parameter_groups(model: nn.Module) -> list[dict]:
    named = list(model.named_parameters())
    decay = [p for n, p in named if n.endswith("weight") and "norm" not in n]
    no_decay = [p for n, p in named if n.endswith("bias")]
    return [{"params": decay, "weight_decay": 0.05}, {"params": no_decay, "weight_decay": 0.0}]


def make():
    torch.manual_seed(0)
    model = Classifier()
    optimizer = torch.optim.AdamW(parameter_groups(model), lr=1e-3)  # expect[run]: TD601
    return model, make_batch(), nn.CrossEntropyLoss(), optimizer


def main() -> None:
    model, (inputs, labels), criterion, optimizer = make()
    for _step in range(50):
        optimizer.zero_grad()
        loss = criterion(model(inputs), labels)
        loss.backward()
        optimizer.step()
    print(f"loss after 50 steps: {loss.item():.3f}")
    untouched = bool((model.blocks[0].norm.weight == 1).all())
    print(f"first LayerNorm weight, still all ones: {untouched}")


if __name__ == "__main__":
    main()
