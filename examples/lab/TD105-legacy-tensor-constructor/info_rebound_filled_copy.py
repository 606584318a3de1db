"""Information: a decoder step that makes its latent placeholder with a legacy constructor, then rebinds
the name to its own copy moved to the input's device and zeroed in the same chain.

The uninitialised memory of `torch.FloatTensor(batch, dim)` is never read: the name holds
the zeroed copy from the next line on (the legacy spelling is only information).
"""

import torch
from torch import nn

LATENT = 4


class Decoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(8 + LATENT, 8)

    def forward(self, inputs: torch.Tensor, lat: torch.Tensor | None = None) -> torch.Tensor:
        if lat is None:
            lat = torch.FloatTensor(len(inputs), LATENT)  # expect: TD105
            lat = lat.to(inputs.device).zero_().type(inputs.type())
        return self.proj(torch.cat([inputs, lat], dim=1))


def main() -> None:
    torch.manual_seed(0)
    decoder = Decoder()
    out = decoder(torch.randn(3, 8))
    assert torch.isfinite(out).all()
    print(f"decoded {tuple(out.shape)}")


if __name__ == "__main__":
    main()
