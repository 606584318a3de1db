"""Label embeddings declared with a legacy constructor and initialised through a list.

The model keeps its label embeddings in a plain list attribute as well (one entry per
label set) and fills every entry of that list with `nn.init.uniform_` right after
building it, so nothing reads the uninitialised memory; the legacy constructor is still
worth replacing by ``torch.empty``.
"""

import torch
from torch import nn

CLASSES, DIM = 5, 8


class LabelScorer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(DIM, DIM)
        self.label_embs = nn.Parameter(torch.FloatTensor(CLASSES, DIM))  # expect: TD105
        self.label_embs_list = [self.label_embs]
        for embedding in self.label_embs_list:
            nn.init.uniform_(embedding)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x) @ self.label_embs.t()


def main() -> None:
    torch.manual_seed(0)
    model = LabelScorer()
    assert torch.all((model.label_embs >= 0) & (model.label_embs <= 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(16, DIM), torch.randint(0, CLASSES, (16,))
    for _ in range(10):
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
    print(f"loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
