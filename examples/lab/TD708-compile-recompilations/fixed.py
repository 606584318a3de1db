"""A compiled text classifier fed length-sorted batches padded to a few fixed lengths.

Padding each batch up to the next multiple of 32 leaves two shapes in all (32 and 64), so
the model is compiled twice and never again.
"""

import torch
from torch import nn

VOCAB, PAD = 1000, 0


class BagClassifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 32, padding_idx=PAD)
        self.head = nn.Linear(32, 2)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        mask = (ids != PAD).unsqueeze(-1).float()
        pooled = (self.embed(ids) * mask).sum(1) / mask.sum(1).clamp(min=1)
        return self.head(pooled)


def length_sorted_batches(count: int, size: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Batches of reviews of similar length, padded to a multiple of 32 tokens."""
    batches = []
    for index in range(count):
        longest = 8 + 4 * index
        lengths = torch.randint(longest // 2, longest + 1, (size,))
        lengths[0] = longest
        ids = torch.full((size, -(-longest // 32) * 32), PAD)  # round up to a multiple of 32
        for row, length in enumerate(lengths.tolist()):
            ids[row, :length] = torch.randint(1, VOCAB, (length,))
        batches.append((ids, torch.randint(0, 2, (size,))))
    return batches


def main() -> None:
    torch.manual_seed(0)
    model = BagClassifier()
    compiled = torch.compile(model, backend="eager", dynamic=False)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for epoch in range(2):
        for ids, labels in length_sorted_batches(12, 16):
            loss = nn.functional.cross_entropy(compiled(ids), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
