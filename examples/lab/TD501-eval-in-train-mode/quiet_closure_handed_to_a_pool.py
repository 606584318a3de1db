"""Batched inference through a closure handed to a thread pool.

`predict_all()` loads the network and puts it in eval mode, then defines `run()`, which
reads that network from the enclosing function, and hands it to `pool.map`: nothing calls
`run` by name, but it can only run after its `def`, by which time the network is in eval
mode, so its dropout is off.
"""

from concurrent.futures import ThreadPoolExecutor

import torch
from torch import nn


class Network(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(6, 32), nn.ReLU(), nn.Dropout(0.3), nn.Linear(32, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


def predict_all(state: dict[str, torch.Tensor], chunks: list[torch.Tensor]) -> torch.Tensor:
    network = Network()
    network.load_state_dict(state)
    network.eval()

    def run(chunk: torch.Tensor) -> torch.Tensor:
        outputs = []
        for batch in chunk.split(8):
            with torch.no_grad():
                outputs.append(network(batch).argmax(-1))
        return torch.cat(outputs)

    with ThreadPoolExecutor(max_workers=2) as pool:
        return torch.cat(list(pool.map(run, chunks)))


def main() -> None:
    torch.manual_seed(0)
    state = Network().state_dict()
    chunks = list(torch.randn(64, 6).split(16))
    first, second = predict_all(state, chunks), predict_all(state, chunks)
    assert torch.equal(first, second)  # no dropout: the same predictions twice
    print(first.bincount(minlength=3).tolist())


if __name__ == "__main__":
    main()
