"""An evaluation script that picks its checkpoint format with a switch set just above.

The script can read either a state dict or a pickled model, chosen by a constant written
at the top (`load_state_dict = True`). The branch that would use the loaded object as a
module never runs: the file only ever feeds `load_state_dict`, a format the safe
`weights_only` default reads.
"""

import os
import tempfile

import torch
from torch import nn


def build() -> nn.Module:
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))


def main() -> None:
    torch.manual_seed(0)
    path = os.path.join(tempfile.mkdtemp(), "weights.pth")
    torch.save(build().state_dict(), path)

    model = build()
    load_state_dict = True
    state = torch.load(path, map_location="cpu")
    if load_state_dict:
        model.load_state_dict(state, strict=True)
    else:
        model = state["net"]
    model.eval()
    with torch.no_grad():
        print(model(torch.randn(3, 4)).shape)


if __name__ == "__main__":
    main()
