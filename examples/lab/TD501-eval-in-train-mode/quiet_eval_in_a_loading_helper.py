"""An inference API whose network is loaded by a helper method that puts it in eval mode.

`__init__` stores what `_load()` returns; `_load()` loads the weights and calls
`net.eval()` before returning it, and the compiled wrapper made from it afterwards keeps
its mode. `predict()` runs the network under `no_grad` without calling `eval()` itself:
the network is already in eval mode, so dropout is off.
"""

import torch
from torch import nn


class Network(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(6, 32), nn.ReLU(), nn.Dropout(0.3), nn.Linear(32, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


class Predictor:
    def __init__(self, state: dict[str, torch.Tensor], compile: bool = False) -> None:
        self.net = self._load(state)
        if compile:
            self.net = torch.compile(self.net)

    def _load(self, state: dict[str, torch.Tensor]) -> nn.Module:
        net = Network()
        net.load_state_dict(state)
        net.eval()
        return net

    @torch.no_grad()
    def predict(self, inputs: torch.Tensor, batch_size: int = 16) -> torch.Tensor:
        outputs = []
        for batch in inputs.split(batch_size):
            outputs.append(self.net(batch).argmax(-1))
        return torch.cat(outputs)


def main() -> None:
    torch.manual_seed(0)
    predictor = Predictor(Network().state_dict())
    inputs = torch.randn(40, 6)
    assert torch.equal(predictor.predict(inputs), predictor.predict(inputs))
    print(predictor.predict(inputs).bincount(minlength=3).tolist())


if __name__ == "__main__":
    main()
