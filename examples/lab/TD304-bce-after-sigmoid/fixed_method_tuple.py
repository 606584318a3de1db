"""Link predictor whose scoring method returns the raw scores of both edge sets.

BCEWithLogitsLoss applies sigmoid inside the loss, in a form that stays exact for large
logits; sigmoid is applied only where probabilities are wanted (the accuracy).
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

    def edge_scores(
        self, sources: torch.Tensor, targets: torch.Tensor, negatives: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return self.score(sources, targets), self.score(sources, negatives)


def make_edges(size: int = 1024) -> tuple[torch.Tensor, torch.Tensor]:
    sources = torch.randint(0, NODES, (size,))
    targets = (sources + torch.randint(1, 4, (size,))) % NODES  # near neighbours link
    return sources, targets


def main() -> None:
    torch.manual_seed(0)
    sources, targets = make_edges()
    model = LinkPredictor()
    criterion = nn.BCEWithLogitsLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for epoch in range(3):
        correct = 0
        for start in range(0, len(sources), 128):
            src, dst = sources[start : start + 128], targets[start : start + 128]
            negatives = torch.randint(0, NODES, (len(src),))
            ones, zeros = torch.ones(len(src)), torch.zeros(len(src))
            optimizer.zero_grad()
            pos_score, neg_score = model.edge_scores(src, dst, negatives)
            loss = criterion(pos_score.squeeze(), ones)
            loss = loss + criterion(neg_score.squeeze(), zeros)
            loss.backward()
            optimizer.step()
            correct += int((pos_score.sigmoid() > 0.5).sum())
        print(f"epoch {epoch}: loss {loss.item():.4f}, positives found {correct}")


if __name__ == "__main__":
    main()
