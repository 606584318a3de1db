"""The same tiny causal language model, its attention mask sized by the context length.

The mask is `block_size` x `block_size` (32 x 32), whatever the corpus size.
"""

import torch
from torch import nn

torch.manual_seed(0)
VOCAB, BLOCK, DIM = 64, 32, 32


class TinyCausalLM(nn.Module):
    def __init__(self, max_len: int) -> None:
        super().__init__()
        self.max_len = max_len
        self.embed = nn.Embedding(VOCAB, DIM)
        self.attn = nn.MultiheadAttention(DIM, num_heads=4, batch_first=True)
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        mask = torch.ones(self.max_len, self.max_len).triu(1).bool()
        mask = mask[: ids.size(1), : ids.size(1)]
        h = self.embed(ids)
        h, _ = self.attn(h, h, h, attn_mask=mask, need_weights=False)
        return self.head(h)


def main() -> None:
    tokens = torch.randint(0, VOCAB, (10_000_000,), dtype=torch.int32)
    model = TinyCausalLM(max_len=BLOCK)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(20):
        starts = torch.randint(0, len(tokens) - BLOCK - 1, (16,))
        batch = tokens[starts.unsqueeze(1) + torch.arange(BLOCK + 1)].long()
        logits = model(batch[:, :-1])
        loss = nn.functional.cross_entropy(logits.reshape(-1, VOCAB), batch[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"final loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
