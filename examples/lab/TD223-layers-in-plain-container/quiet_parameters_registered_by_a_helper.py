"""A highway network whose layers sit in plain lists, registered by a helper method.

Each list of layers is handed, layer by layer, to `_register`, a method of the class that
registers every tensor it is given on the module. The weights the layers use are then in
`parameters()` (the optimizer trains them), in `state_dict()`, and `.to()` moves them:
nothing of the layers is lost, although no `nn.ModuleList` holds them.
"""

import torch
from torch import nn


class Highway(nn.Module):
    def __init__(self, size: int, depth: int) -> None:
        super().__init__()
        self.transforms = [nn.Linear(size, size) for _ in range(depth)]
        for index, layer in enumerate(self.transforms):
            self._register(layer.parameters(), f"transform_{index}")
        self.gates = [nn.Linear(size, size) for _ in range(depth)]
        for index, layer in enumerate(self.gates):
            self._register(layer.parameters(), f"gate_{index}")

    def _register(self, tensors, prefix: str) -> None:
        for index, tensor in enumerate(tensors):
            self.register_parameter(name=f"{prefix}_{index}", param=tensor)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for transform, gate in zip(self.transforms, self.gates):
            carry = torch.sigmoid(gate(x))
            x = carry * torch.relu(transform(x)) + (1 - carry) * x
        return x


def main() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(Highway(16, depth=2), nn.Linear(16, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    x = torch.randn(128, 16)
    y = x.sum(dim=1, keepdim=True)
    for _ in range(30):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
    print(len(model.state_dict()), "tensors saved,", round(loss.item(), 3))


if __name__ == "__main__":
    main()
