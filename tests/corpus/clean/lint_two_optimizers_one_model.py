"""Different optimizers for two parts of one model, both cleared and stepped every batch."""

import torch
from torch import nn


def main() -> None:
    torch.manual_seed(0)
    embedding = nn.Embedding(100, 16, sparse=True)
    classifier = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2))
    sparse_opt = torch.optim.SparseAdam(embedding.parameters(), lr=1e-2)
    dense_opt = torch.optim.Adam(classifier.parameters(), lr=1e-3)
    optimizers = [sparse_opt, dense_opt]
    tokens = torch.randint(0, 100, (256, 6))
    labels = (tokens.float().mean(dim=1) > 50).long()
    for _ in range(20):
        for optimizer in optimizers:
            optimizer.zero_grad()
        logits = classifier(embedding(tokens).mean(dim=1))
        nn.functional.cross_entropy(logits, labels).backward()
        for optimizer in optimizers:
            optimizer.step()
    print("done")


if __name__ == "__main__":
    main()
