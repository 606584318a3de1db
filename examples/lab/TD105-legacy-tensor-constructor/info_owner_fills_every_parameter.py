"""A session recommender whose graph cell declares its weights with ``torch.Tensor``.

The cell's parameters hold uninitialised memory when the cell is built, but the model
that owns it builds the cell and then calls a method that draws every one of its own
parameters, the cell's included, from a uniform distribution. Nothing reads the raw
memory; the legacy constructor is still worth replacing by ``torch.empty``.
"""

import math

import torch
from torch import nn
from torch.nn import Parameter


class GraphCell(nn.Module):
    def __init__(self, size: int) -> None:
        super().__init__()
        self.w_ih = Parameter(torch.Tensor(3 * size, 2 * size))  # expect: TD105
        self.w_hh = Parameter(torch.Tensor(3 * size, size))  # expect: TD105

    def forward(self, inputs: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
        gates = inputs @ self.w_ih.t() + hidden @ self.w_hh.t()
        reset, update, new = gates.chunk(3, -1)
        return torch.sigmoid(update) * hidden + (1 - torch.sigmoid(update)) * torch.tanh(
            new + torch.sigmoid(reset)
        )


class SessionRecommender(nn.Module):
    def __init__(self, items: int, size: int) -> None:
        super().__init__()
        self.size = size
        self.embedding = nn.Embedding(items, size)
        self.cell = GraphCell(size)
        self.scores = nn.Linear(size, items)
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.size)
        for weight in self.parameters():
            weight.data.uniform_(-bound, bound)

    def forward(self, session: torch.Tensor) -> torch.Tensor:
        hidden = self.embedding(session)
        neighbours = torch.cat([hidden.roll(1, 1), hidden.roll(-1, 1)], -1)
        return self.scores(self.cell(neighbours, hidden).mean(1))


def main() -> None:
    torch.manual_seed(0)
    model = SessionRecommender(items=50, size=16)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(5):
        sessions = torch.randint(0, 50, (8, 6))
        loss = nn.functional.cross_entropy(model(sessions), sessions[:, -1])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
