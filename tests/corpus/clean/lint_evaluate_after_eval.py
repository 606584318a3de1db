"""A language-model-style evaluation: eval() first, then a loss under no_grad in the loop."""

import torch
from torch import nn


class TinyLM(nn.Module):
    def __init__(self, vocab: int, hidden: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.drop = nn.Dropout(0.2)
        self.rnn = nn.GRU(hidden, hidden, batch_first=True)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        hidden, _ = self.rnn(self.drop(self.embed(tokens)))
        return self.out(self.drop(hidden))


def evaluate(model: nn.Module, criterion: nn.Module, batches: list[torch.Tensor]) -> float:
    model.eval()
    total = 0.0
    with torch.no_grad():
        for batch in batches:
            logits = model(batch[:, :-1])
            total += criterion(logits.reshape(-1, logits.size(-1)), batch[:, 1:].reshape(-1)).item()
    return total / len(batches)


def main() -> None:
    torch.manual_seed(0)
    vocab = 50
    model = TinyLM(vocab, 32)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    batches = [torch.randint(0, vocab, (8, 17)) for _ in range(10)]
    for epoch in range(2):
        model.train()
        for batch in batches:
            optimizer.zero_grad()
            logits = model(batch[:, :-1])
            criterion(logits.reshape(-1, vocab), batch[:, 1:].reshape(-1)).backward()
            optimizer.step()
        print(f"epoch {epoch}: validation loss {evaluate(model, criterion, batches[:3]):.3f}")


if __name__ == "__main__":
    main()
