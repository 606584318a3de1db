"""A network whose dropout is switched on and off by an input the caller feeds with every
batch, as DeepChem's CNN does for Monte-Carlo dropout.

`forward` receives `(x, dropout_switch)`: the training loop feeds 1, prediction feeds 0,
and uncertainty estimation feeds 1 on purpose. The caller decides, so `F.dropout` needs no
`training=` flag here.
"""

import torch
import torch.nn.functional as F
from torch import nn


class SwitchedDropoutNet(nn.Module):
    def __init__(self, rate: float = 0.3) -> None:
        super().__init__()
        self.hidden = nn.Linear(8, 32)
        self.out = nn.Linear(32, 1)
        self.rate = rate

    def forward(self, inputs: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, dropout_switch = inputs
        x = torch.relu(self.hidden(x))
        if self.rate > 0 and dropout_switch:
            x = F.dropout(x, self.rate)
        return self.out(x)


def main() -> None:
    torch.manual_seed(0)
    model = SwitchedDropoutNet()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    x = torch.randn(128, 8)
    y = x.sum(1, keepdim=True)
    for _ in range(50):
        optimizer.zero_grad()
        F.mse_loss(model((x, torch.tensor(1.0))), y).backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        prediction = model((x, torch.tensor(0.0)))
        samples = torch.stack([model((x, torch.tensor(1.0))) for _ in range(10)])
    print(f"prediction mse {F.mse_loss(prediction, y).item():.4f}, mc std {samples.std(0).mean().item():.4f}")


if __name__ == "__main__":
    main()
