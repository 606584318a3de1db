"""A word-level language model trained with a hand-written SGD step on `p.data`, with
gradient clipping between backward and the update (no optimizer object)."""

import torch
from torch import nn


class TinyLM(nn.Module):
    def __init__(self, vocab=50, hidden=32):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.rnn = nn.GRU(hidden, hidden, batch_first=True)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, tokens):
        output, _ = self.rnn(self.embed(tokens))
        return self.out(output)


def main():
    torch.manual_seed(0)
    corpus = torch.arange(2000) * 7 % 50
    model, lr = TinyLM(), 2.0
    criterion = nn.CrossEntropyLoss()
    for step in range(60):
        start = (step * 37) % (len(corpus) - 21)
        tokens = corpus[start:start + 21].view(1, -1)
        model.zero_grad()
        logits = model(tokens[:, :-1])
        loss = criterion(logits.reshape(-1, 50), tokens[:, 1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
        if step % 20 == 19:
            print(f"step {step}: loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
