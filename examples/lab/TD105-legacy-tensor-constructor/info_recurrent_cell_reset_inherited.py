"""A peephole LSTM cell built by subclassing `nn.LSTMCell` for a sequence imputer.

The subclass adds a peephole weight and bias with the legacy `torch.Tensor(shape)` and
then calls `self.reset_parameters()`, which it does not define: the inherited reset of
torch's recurrent cells draws every parameter of the module uniformly, the new ones
included. Nothing reads the raw memory; only the spelling is legacy.
"""

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn import Parameter


class PeepholeLSTMCell(nn.LSTMCell):
    def __init__(self, input_size: int, hidden_size: int) -> None:
        super().__init__(input_size, hidden_size)
        self.weight_ch = Parameter(torch.Tensor(3 * hidden_size, hidden_size))  # expect: TD105
        self.bias_ch = Parameter(torch.Tensor(3 * hidden_size))  # expect: TD105
        self.reset_parameters()

    def forward(  # type: ignore[override]
        self, x: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        h, c = state
        gates = F.linear(x, self.weight_ih, self.bias_ih)
        gates = gates + F.linear(h, self.weight_hh, self.bias_hh)
        peep = F.linear(c, self.weight_ch, self.bias_ch)
        size = self.hidden_size
        i = torch.sigmoid(gates[:, :size] + peep[:, :size])
        f = torch.sigmoid(gates[:, size : 2 * size] + peep[:, size : 2 * size])
        g = torch.tanh(gates[:, 2 * size : 3 * size])
        o = torch.sigmoid(gates[:, 3 * size :] + peep[:, 2 * size :])
        c = f * c + i * g
        return o * torch.tanh(c), c


def main() -> None:
    torch.manual_seed(0)
    cell = PeepholeLSTMCell(4, 8)
    assert all(p.abs().max() <= 8**-0.5 for p in cell.parameters())  # all drawn by the reset
    series = torch.randn(16, 10, 4)
    head = nn.Linear(8, 4)
    optimizer = torch.optim.Adam([*cell.parameters(), *head.parameters()], lr=1e-2)
    for _ in range(5):
        h = c = torch.zeros(16, 8)
        loss = torch.zeros(())
        for t in range(9):
            h, c = cell(series[:, t], (h, c))
            loss = loss + F.mse_loss(head(h), series[:, t + 1])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
