"""Truncated backpropagation through time: the carried hidden state is detached per chunk."""

import torch
from torch import nn

VOCAB, HIDDEN, CHUNK = 32, 64, 20


class CharLSTM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 16)
        self.lstm = nn.LSTM(16, HIDDEN, batch_first=True)
        self.head = nn.Linear(HIDDEN, VOCAB)

    def forward(self, ids: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor] | None):
        out, state = self.lstm(self.embed(ids), state)
        return self.head(out), state


def main() -> None:
    torch.manual_seed(0)
    text = torch.randint(0, VOCAB, (8, 401))
    model = CharLSTM()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for epoch in range(2):
        state = None
        for start in range(0, text.size(1) - 1, CHUNK):
            inputs = text[:, start: start + CHUNK]
            targets = text[:, start + 1: start + CHUNK + 1]
            logits, state = model(inputs, state)
            state = tuple(s.detach() for s in state)  # keep the values, drop the old graph
            loss = nn.functional.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
