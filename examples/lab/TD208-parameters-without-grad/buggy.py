"""Fine-tuning a review classifier with the encoder run under torch.no_grad().

The no_grad block was meant to save memory, but the optimizer was built over the whole
model: the encoder's parameters require grad, get none, and never train, so the model
only learns a linear head on frozen random features.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

VOCAB, CLASSES = 1000, 2


class ReviewClassifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 32)
        self.encoder = nn.GRU(32, 48, batch_first=True)
        self.head = nn.Linear(48, CLASSES)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            _, state = self.encoder(self.embed(tokens))
        return self.head(state[-1])


def make_dataset(size: int = 256, length: int = 24) -> TensorDataset:
    generator = torch.Generator().manual_seed(1)
    sentiment = torch.randint(0, CLASSES, (size,), generator=generator)
    # Positive reviews draw more words from the upper half of the vocabulary.
    offset = sentiment[:, None] * (VOCAB // 4)
    tokens = offset + torch.randint(0, VOCAB * 3 // 4, (size, length), generator=generator)
    return TensorDataset(tokens, sentiment)


def make():
    torch.manual_seed(0)
    model = ReviewClassifier()
    loader = DataLoader(make_dataset(), batch_size=32, shuffle=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    return model, loader, nn.CrossEntropyLoss(), optimizer


def main() -> None:
    model, loader, criterion, optimizer = make()
    for epoch in range(3):
        for tokens, sentiment in loader:
            optimizer.zero_grad()
            loss = criterion(model(tokens), sentiment)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
