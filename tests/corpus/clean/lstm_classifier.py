"""An LSTM sequence classifier over padded, variable-length token sequences.

Sequences are packed with `pack_padded_sequence` so padding does not reach the LSTM; the
last hidden state feeds the classifier. Gradients are clipped (usual for RNNs).
"""

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence

VOCAB = 50
PAD = 0
MAX_LEN = 12


class LSTMClassifier(nn.Module):
    def __init__(self, vocab=VOCAB, embed=32, hidden=48, classes=2):
        super().__init__()
        self.embedding = nn.Embedding(vocab, embed, padding_idx=PAD)
        self.lstm = nn.LSTM(embed, hidden, batch_first=True)
        self.classifier = nn.Linear(hidden, classes)

    def forward(self, tokens, lengths):
        packed = pack_padded_sequence(self.embedding(tokens), lengths.cpu(), batch_first=True,
                                      enforce_sorted=False)
        _, (hidden, _) = self.lstm(packed)
        return self.classifier(hidden[-1])


def make_batch(generator, size=32):
    """Label 1 when token 7 occurs in the sequence."""
    lengths = torch.randint(3, MAX_LEN + 1, (size,), generator=generator)
    tokens = torch.randint(1, VOCAB, (size, MAX_LEN), generator=generator)
    positions = torch.arange(MAX_LEN).expand(size, MAX_LEN)
    tokens = tokens.masked_fill(positions >= lengths.unsqueeze(1), PAD)
    labels = ((tokens == 7) | (tokens == 8)).any(dim=1).long()
    return (tokens, lengths), labels


def make():
    torch.manual_seed(0)
    model = LSTMClassifier()
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)
    return model, make_batch(torch.Generator().manual_seed(15), size=64), nn.CrossEntropyLoss(), optimizer


def main():
    model, _, criterion, optimizer = make()
    generator = torch.Generator().manual_seed(16)
    model.train()
    for step in range(60):
        (tokens, lengths), labels = make_batch(generator)
        optimizer.zero_grad()
        loss = criterion(model(tokens, lengths), labels)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=5.0)
        optimizer.step()
        if step % 20 == 0:
            print(f"step {step}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
