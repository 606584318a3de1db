"""Variable-length sequences: padded batches, a mask in the loss, a Transformer encoder."""

import torch
from torch import nn
from torch.nn.utils.rnn import pad_sequence


class Tagger(nn.Module):
    def __init__(self, vocab: int, tags: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, 32, padding_idx=0)
        layer = nn.TransformerEncoderLayer(32, nhead=4, dim_feedforward=64, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2)
        self.out = nn.Linear(32, tags)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        padding = tokens == 0
        return self.out(self.encoder(self.embed(tokens), src_key_padding_mask=padding))


def collate(batch):
    tokens = pad_sequence([t for t, _ in batch], batch_first=True, padding_value=0)
    tags = pad_sequence([g for _, g in batch], batch_first=True, padding_value=-100)
    return tokens, tags


def main() -> None:
    torch.manual_seed(0)
    samples = []
    for length in torch.randint(3, 12, (64,)).tolist():
        tokens = torch.randint(1, 30, (length,))
        samples.append((tokens, tokens % 5))
    loader = torch.utils.data.DataLoader(samples, batch_size=8, shuffle=True, collate_fn=collate)
    model = Tagger(30, 5)
    criterion = nn.CrossEntropyLoss(ignore_index=-100)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(2):
        model.train()
        for tokens, tags in loader:
            optimizer.zero_grad()
            logits = model(tokens)
            criterion(logits.reshape(-1, 5), tags.reshape(-1)).backward()
            optimizer.step()
    model.eval()
    with torch.no_grad():
        tokens, tags = collate(samples[:8])
        accuracy = (model(tokens).argmax(-1) == tags)[tags != -100].float().mean()
    print(f"accuracy {accuracy.item():.2f}")


if __name__ == "__main__":
    main()
