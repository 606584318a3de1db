"""A sentence decoder whose dropout rate is an argument of every call.

`Decoder.forward` takes the word-dropout rate as a parameter with no default, and the
model passes it on: training hands in the configured rate, validation and sampling hand
in 0. Evaluation drops nothing, but only because every evaluating call remembers to pass
0; lint does not follow the calls into the model, so the finding stays as information.
"""

import torch
import torch.nn.functional as F
from torch import nn


class Decoder(nn.Module):
    def __init__(self, size: int, vocabulary: int) -> None:
        super().__init__()
        self.rnn = nn.GRU(size, size, batch_first=True)
        self.out = nn.Linear(size, vocabulary)

    def forward(self, inputs: torch.Tensor, drop_prob: float) -> torch.Tensor:
        inputs = F.dropout(inputs, drop_prob)  # expect: TD506
        hidden, _ = self.rnn(inputs)
        return self.out(hidden)


class SentenceModel(nn.Module):
    def __init__(self, size: int, vocabulary: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocabulary, size)
        self.decoder = Decoder(size, vocabulary)

    def forward(self, drop_prob: float, tokens: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.embed(tokens), drop_prob)

    def validate(self, tokens: torch.Tensor) -> torch.Tensor:
        logits = self(0.0, tokens[:, :-1])
        return F.cross_entropy(logits.transpose(1, 2), tokens[:, 1:])


def main() -> None:
    torch.manual_seed(0)
    model = SentenceModel(16, vocabulary=50)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    tokens = torch.randint(0, 50, (32, 12))
    for _ in range(20):
        optimizer.zero_grad()
        logits = model(0.3, tokens[:, :-1])
        loss = F.cross_entropy(logits.transpose(1, 2), tokens[:, 1:])
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        print(round(model.validate(tokens).item(), 3))


if __name__ == "__main__":
    main()
