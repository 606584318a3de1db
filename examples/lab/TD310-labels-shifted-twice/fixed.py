"""The tiny causal language model of buggy.py, given its labels unshifted.

The dataset returns the tokens as labels and the model shifts them once, so each
position learns the next token.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

VOCAB = 16


class TinyCausalLM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 32)
        self.rnn = nn.GRU(32, 32, batch_first=True)
        self.head = nn.Linear(32, VOCAB)

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor | None = None) -> tuple:
        logits = self.head(self.rnn(self.embed(input_ids))[0])
        loss = None
        if labels is not None:
            shift_logits = logits[:, :-1].reshape(-1, VOCAB)
            shift_labels = labels[:, 1:].reshape(-1)
            loss = nn.functional.cross_entropy(shift_logits, shift_labels, ignore_index=-100)
        return logits, loss


class CountingSequences(Dataset):
    """Sequences that count up modulo the vocabulary from a random start."""

    def __init__(self, size: int) -> None:
        self.starts = torch.randint(0, VOCAB, (size,))

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        tokens = (self.starts[index] + torch.arange(12)) % VOCAB
        return {"input_ids": tokens, "labels": tokens.clone()}


def next_token_accuracy(model: TinyCausalLM, data: CountingSequences) -> float:
    batch = torch.stack([data[i]["input_ids"] for i in range(len(data))])
    with torch.no_grad():
        logits, _ = model(batch)
    return (logits[:, :-1].argmax(-1) == batch[:, 1:]).float().mean().item()


def main() -> None:
    torch.manual_seed(0)
    data = CountingSequences(512)
    model = TinyCausalLM()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for epoch in range(3):
        for batch in DataLoader(data, batch_size=32, shuffle=True):
            _, loss = model(**batch)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.3f}, next-token accuracy "
              f"{next_token_accuracy(model, data):.2f}")


if __name__ == "__main__":
    main()
