"""A variance-adaptor TTS block that splits the inference and training paths by hand.

`_forward(..., is_inference=False)` branches on the author's own switch: the training side
fits the prosody head to gold targets, the inference side predicts them. Both sides apply
`F.dropout` to the reduced encoder states, and the inference side does so on purpose (it
keeps the sampled prosody varied). Each side runs only on the path it was written for,
so neither needs a `training=` flag.

`InferenceSynth`, the inference-only copy that loads the trained weights, ends its
`__init__` with `self.eval()` and still applies the same dropout: a module that puts
itself in eval mode and then drops activations means to.
"""

import torch
import torch.nn.functional as F
from torch import nn


class Synth(nn.Module):
    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.encoder = nn.Linear(8, width)
        self.reduce = nn.Linear(width, 4)
        self.prosody = nn.Linear(4, 1)

    def forward(self, x: torch.Tensor, gold: torch.Tensor) -> torch.Tensor:
        return self._forward(x, gold)

    def inference(self, x: torch.Tensor) -> torch.Tensor:
        self.eval()
        with torch.no_grad():
            return self._forward(x, is_inference=True)

    def _forward(
        self, x: torch.Tensor, gold: torch.Tensor | None = None, is_inference: bool = False
    ) -> torch.Tensor:
        encoded = torch.relu(self.encoder(x))
        if is_inference:
            return self.prosody(F.dropout(self.reduce(encoded), p=0.1))
        reduced = F.dropout(self.reduce(encoded), p=0.1)
        return F.mse_loss(self.prosody(reduced), gold)


class InferenceSynth(nn.Module):
    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.encoder = nn.Linear(8, width)
        self.reduce = nn.Linear(width, 4)
        self.prosody = nn.Linear(4, 1)
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        encoded = torch.relu(self.encoder(x))
        return self.prosody(F.dropout(self.reduce(encoded), p=0.1))


def main() -> None:
    torch.manual_seed(0)
    model = Synth()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    x = torch.randn(64, 8)
    y = x[:, :1] - x[:, 1:2]
    for _ in range(50):
        optimizer.zero_grad()
        model(x, y).backward()
        optimizer.step()
    predicted = model.inference(x)
    deployed = InferenceSynth()
    deployed.load_state_dict(model.state_dict())
    with torch.no_grad():
        again = deployed(x)
    print(f"mse {F.mse_loss(predicted, y).item():.4f}, deployed {F.mse_loss(again, y).item():.4f}")


if __name__ == "__main__":
    main()
