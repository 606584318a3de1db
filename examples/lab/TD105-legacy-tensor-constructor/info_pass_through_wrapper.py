"""A device-aware helper that passes its callers' arguments to a legacy constructor.

`float_tensor(*args)` hands whatever it is given to `torch.FloatTensor`: one caller passes
data (a nested list), the other a shape that it fills with `uniform_` on the next line.
Inside the helper nothing says which, so the legacy spelling is all there is to report;
`torch.tensor(data)` and `torch.empty(shape)` at the call sites would say what is meant.
"""

import torch
from torch import nn

DEVICE = torch.device("cpu")


def float_tensor(*args, **kwargs):
    return torch.FloatTensor(*args, **kwargs).to(DEVICE)  # expect: TD105


def fan_in_uniform(shape: torch.Size) -> torch.Tensor:
    bound = 1.0 / shape[1] ** 0.5
    weight = float_tensor(shape)
    weight.uniform_(-bound, bound)
    return weight


def main() -> None:
    torch.manual_seed(0)
    layer = nn.Linear(4, 3)
    with torch.no_grad():
        layer.weight.copy_(fan_in_uniform(layer.weight.shape))
    offsets = float_tensor([[0.5, -0.5, 0.0]])
    inputs = torch.randn(8, 4)
    print(f"mean output {(layer(inputs) + offsets).mean().item():.3f}")


if __name__ == "__main__":
    main()
