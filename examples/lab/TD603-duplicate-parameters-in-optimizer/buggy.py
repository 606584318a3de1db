"""A tiny next-token model with tied input and output embeddings, optimised module by module.

The output layer shares its weight with the embedding (weight tying). The optimizer's
groups are collected by walking the modules and taking each one's own parameters, so the
shared matrix is collected twice, once from the embedding and once from the output layer.
PyTorch only warns about a repeat inside one group; `step()` then updates the tied weight
twice per step, doubling its learning rate.
"""

import torch
import torch.nn.functional as F
from torch import nn

VOCAB = 50
WIDTH = 32


class TinyLanguageModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.mix = nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.Tanh())
        self.out = nn.Linear(WIDTH, VOCAB, bias=False)
        self.out.weight = self.embed.weight  # weight tying

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.out(self.mix(self.embed(tokens)))


def make_batch(size: int = 128) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, VOCAB, (size,), generator=generator)
    return tokens, (tokens * 7 + 3) % VOCAB


def parameter_groups(model: nn.Module) -> list[dict]:
    weights, biases = [], []
    for module in model.modules():
        for name, param in module.named_parameters(recurse=False):
            (biases if name == "bias" else weights).append(param)
    return [{"params": weights, "weight_decay": 1e-4}, {"params": biases, "weight_decay": 0.0}]


def make():
    torch.manual_seed(0)
    model = TinyLanguageModel()
    optimizer = torch.optim.SGD(parameter_groups(model), lr=0.5, momentum=0.9)
    return model, make_batch(), F.cross_entropy, optimizer


def main() -> None:
    model, (tokens, targets), loss_fn, optimizer = make()
    for _step in range(100):
        optimizer.zero_grad()
        loss = loss_fn(model(tokens), targets)
        loss.backward()
        optimizer.step()
    print(f"loss after 100 steps: {loss.item():.3f}")


if __name__ == "__main__":
    main()
