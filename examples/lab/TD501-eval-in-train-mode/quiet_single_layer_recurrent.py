"""A keypoint-motion predictor with one GRU layer given a dropout, evaluated without
`eval()`.

A recurrent layer applies its `dropout` between stacked layers only, never after the
last one; with a single layer it has none (torch warns that the option expects
`num_layers` above 1). The predictor holds no other mode-dependent layer, so its outputs
are the same in training and evaluation mode and the evaluation loop computes nothing
wrong.
"""

import warnings

import torch
from torch import nn

FEATURES, HIDDEN = 6, 32


class Predictor(nn.Module):
    def __init__(self, num_layers: int = 1, dropout: float = 0.5) -> None:
        super().__init__()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # dropout with one layer
            self.rnn = nn.GRU(FEATURES, HIDDEN, num_layers=num_layers, dropout=dropout,
                              batch_first=True)
        self.linear = nn.Linear(HIDDEN, FEATURES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(self.rnn(x)[0])


def main() -> None:
    torch.manual_seed(0)
    model = Predictor()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    sequences = torch.randn(32, 10, FEATURES)
    for _ in range(5):
        optimizer.zero_grad()
        nn.functional.mse_loss(model(sequences[:, :-1]), sequences[:, 1:]).backward()
        optimizer.step()
    outputs = []
    with torch.no_grad():
        for batch in sequences.split(8):
            outputs.append(model(batch))
    with torch.no_grad():
        again = model(sequences)
    assert torch.allclose(torch.cat(outputs), again, atol=1e-6)  # no dropout in train mode
    print(f"prediction error {nn.functional.mse_loss(again[:, :-1], sequences[:, 1:]):.3f}")


if __name__ == "__main__":
    main()
