"""Link predictor whose scoring method returns a tuple of probabilities.

The training loop never calls the model's forward: it asks
``model.edge_probabilities(...)`` for the positive and negative edges of a batch and
unpacks the pair. Both items went through sigmoid, and BCELoss takes them: a confident
wrong edge (logit past about 17) rounds to probability 1.0, its loss is clamped at 100
and its gradient is exactly zero.
"""

import torch
from torch import nn

NODES = 200
DIM = 16


class LinkPredictor(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embedding = nn.Embedding(NODES, DIM)
        self.scorer = nn.Sequential(nn.Linear(2 * DIM, DIM), nn.ReLU(), nn.Linear(DIM, 1))

    def score(self, sources: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        pair = torch.cat([self.embedding(sources), self.embedding(targets)], dim=1)
        return self.scorer(pair)

    def edge_probabilities(
        self, sources: torch.Tensor, targets: torch.Tensor, negatives: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        pos_score = self.score(sources, targets)
        neg_score = self.score(sources, negatives)
        return pos_score.sigmoid(), neg_score.sigmoid()


def make_edges(size: int = 1024) -> tuple[torch.Tensor, torch.Tensor]:
    sources = torch.randint(0, NODES, (size,))
    targets = (sources + torch.randint(1, 4, (size,))) % NODES  # near neighbours link
    return sources, targets


def main() -> None:
    torch.manual_seed(0)
    sources, targets = make_edges()
    model = LinkPredictor()
    criterion = nn.BCELoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for epoch in range(3):
        for start in range(0, len(sources), 128):
            src, dst = sources[start : start + 128], targets[start : start + 128]
            negatives = torch.randint(0, NODES, (len(src),))
            ones, zeros = torch.ones(len(src)), torch.zeros(len(src))
            optimizer.zero_grad()
            pos_prob, neg_prob = model.edge_probabilities(src, dst, negatives)
            loss = criterion(pos_prob.squeeze(), ones)  # expect: TD304
            loss = loss + criterion(neg_prob.squeeze(), zeros)  # expect: TD304
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
