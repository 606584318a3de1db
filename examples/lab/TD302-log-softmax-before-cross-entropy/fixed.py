"""A text-topic classifier that returns raw logits to CrossEntropyLoss."""

import torch
from torch import nn

VOCAB, TOPICS = 500, 6


class TopicModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.EmbeddingBag(VOCAB, 48, mode="mean")
        self.head = nn.Sequential(nn.Linear(48, 64), nn.ReLU(), nn.Linear(64, TOPICS))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.embed(tokens))  # logits: CrossEntropyLoss normalises them


def make_batch(size: int = 64, length: int = 20) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    topics = torch.randint(0, TOPICS, (size,), generator=generator)
    # Each topic draws most of its words from its own slice of the vocabulary.
    base = topics[:, None] * (VOCAB // TOPICS)
    tokens = base + torch.randint(0, VOCAB // TOPICS, (size, length), generator=generator)
    return tokens, topics


def make():
    torch.manual_seed(0)
    model = TopicModel()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    return model, make_batch(), nn.CrossEntropyLoss(), optimizer


def main() -> None:
    model, (tokens, topics), criterion, optimizer = make()
    for step in range(30):
        optimizer.zero_grad()
        loss = criterion(model(tokens), topics)
        loss.backward()
        optimizer.step()
        if step % 10 == 0:
            print(f"step {step}: loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
