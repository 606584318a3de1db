"""A helper that freezes either a whole module or a single parameter.

For a module it sets the flag of every parameter; the `else` arm of the `isinstance`
test only runs for a tensor, where `requires_grad` is the real flag, so setting the
attribute there freezes it.
"""

import torch
from torch import nn


def set_trainable(model: nn.Module | torch.Tensor, flag: bool) -> None:
    if isinstance(model, nn.Module):
        for parameter in model.parameters():
            parameter.requires_grad = flag
    else:
        model.requires_grad = flag


def main() -> None:
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    set_trainable(model[0], False)
    set_trainable(model[2].bias, False)
    trainable = [name for name, p in model.named_parameters() if p.requires_grad]
    assert trainable == ["2.weight"], trainable
    print(trainable)


if __name__ == "__main__":
    main()
