"""One classifier head per relation, kept in a plain list, each registered by hand.

The heads live in a list, but the loop right after it registers every head's weight and
bias on the module: the same tensors the heads use are in `parameters()` (the optimizer
trains them), in `state_dict()` and moved by `.to()`. Nothing of the heads is lost.
"""

import torch
from torch import nn


class RelationTagger(nn.Module):
    def __init__(self, hidden: int, relations: int) -> None:
        super().__init__()
        self.encoder = nn.Linear(16, hidden)
        self.heads = [nn.Linear(hidden, 3) for _ in range(relations)]
        for index, head in enumerate(self.heads):
            self.register_parameter(f"head_weight_{index}", head.weight)
            self.register_parameter(f"head_bias_{index}", head.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = torch.relu(self.encoder(x))
        return torch.stack([head(hidden) for head in self.heads], dim=1)


def main() -> None:
    torch.manual_seed(0)
    model = RelationTagger(hidden=32, relations=4)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    x, y = torch.randn(64, 16), torch.randint(0, 3, (64, 4))
    for _ in range(20):
        optimizer.zero_grad()
        logits = model(x)
        loss = nn.functional.cross_entropy(logits.reshape(-1, 3), y.reshape(-1))
        loss.backward()
        optimizer.step()
    print(len(list(model.parameters())), "parameters,", round(loss.item(), 3))


if __name__ == "__main__":
    main()
