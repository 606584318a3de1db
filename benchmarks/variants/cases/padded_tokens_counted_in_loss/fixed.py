"""Token tagger (GRU) over variable-length sequences. Short sequences are
right-padded to the longest one in the batch with PAD, and the label
sequences are padded with the PAD tag."""
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader

PAD, VOCAB, N_TAGS = 0, 40, 6


def make_corpus(n, seed):
    g = torch.Generator().manual_seed(seed)
    seqs = []
    for _ in range(n):
        length = int(torch.randint(3, 12, (1,), generator=g)) if torch.rand(1, generator=g) < 0.9 else 32
        tokens = torch.randint(1, VOCAB, (length,), generator=g)
        prev = torch.cat([torch.zeros(1, dtype=torch.long), tokens[:-1]])
        tags = 1 + (tokens + prev) % (N_TAGS - 1)
        seqs.append((tokens, tags))
    return seqs


def collate(batch):
    tokens = pad_sequence([t for t, _ in batch], batch_first=True, padding_value=PAD)
    tags = pad_sequence([y for _, y in batch], batch_first=True, padding_value=PAD)
    return tokens, tags


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, 32, padding_idx=PAD)
        self.rnn = nn.GRU(32, 64, batch_first=True)
        self.out = nn.Linear(64, N_TAGS)

    def forward(self, tokens):
        h, _ = self.rnn(self.emb(tokens))
        return self.out(h)


def main():
    torch.manual_seed(0)
    train = DataLoader(make_corpus(1500, seed=1), batch_size=32, shuffle=True, collate_fn=collate)
    val_tokens, val_tags = collate(make_corpus(500, seed=2))
    model = Tagger()
    criterion = nn.CrossEntropyLoss(ignore_index=PAD)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    for epoch in range(3):
        model.train()
        for tokens, tags in train:
            optimizer.zero_grad()
            loss = criterion(model(tokens).flatten(0, 1), tags.flatten())
            loss.backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            logits = model(val_tokens)
            val_loss = criterion(logits.flatten(0, 1), val_tags.flatten()).item()
            real = val_tags != PAD
            acc = (logits.argmax(-1)[real] == val_tags[real]).float().mean().item()
        print(f"epoch {epoch} val_loss={val_loss:.4f} token_acc={acc:.3f}")


if __name__ == "__main__":
    main()
