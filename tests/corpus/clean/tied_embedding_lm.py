"""A tiny causal Transformer language model with tied input/output embeddings.

The output projection shares its weight with the token embedding (so `parameters()`
yields it once); the embedding is initialised with std `DIM ** -0.5` and scaled by
`sqrt(DIM)` on input, so inputs and initial logits both have unit scale. The causal mask and the sinusoidal position table are derived constants,
registered as non-persistent buffers: rebuilt in `__init__`, not saved in the state_dict.
Logits [B, T, V] are flattened to [B*T, V] against next-token targets [B*T]. In training
each block runs under activation checkpointing (`use_reentrant=False`): its forward is
recomputed during backward instead of storing activations.
"""

import math

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

VOCAB = 32
CONTEXT = 16
DIM = 32


def sinusoidal_table(length, dim):
    position = torch.arange(length).unsqueeze(1)
    frequency = torch.exp(torch.arange(0, dim, 2) * (-math.log(10000.0) / dim))
    table = torch.zeros(length, dim)
    table[:, 0::2] = torch.sin(position * frequency)
    table[:, 1::2] = torch.cos(position * frequency)
    return table


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, DIM)
        nn.init.normal_(self.embedding.weight, std=DIM ** -0.5)
        layer = nn.TransformerEncoderLayer(DIM, 4, dim_feedforward=64, dropout=0.0, batch_first=True,
                                           norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(DIM)
        self.lm_head = nn.Linear(DIM, VOCAB, bias=False)
        self.lm_head.weight = self.embedding.weight
        self.register_buffer("positions", sinusoidal_table(CONTEXT, DIM), persistent=False)
        self.register_buffer("causal_mask", nn.Transformer.generate_square_subsequent_mask(CONTEXT),
                             persistent=False)

    def forward(self, tokens):
        length = tokens.shape[1]
        hidden = self.embedding(tokens) * math.sqrt(DIM) + self.positions[:length]
        mask = self.causal_mask[:length, :length]
        for block in self.blocks.layers:
            if self.training:
                hidden = checkpoint(block, hidden, mask, None, True, use_reentrant=False)
            else:
                hidden = block(hidden, src_mask=mask, is_causal=True)
        return self.lm_head(self.norm(hidden))


def text_batch(generator, size=16):
    """Sequences counting up modulo VOCAB from a random start: next token is predictable."""
    start = torch.randint(0, VOCAB, (size, 1), generator=generator)
    sequence = (start + torch.arange(CONTEXT + 1)) % VOCAB
    return sequence[:, :-1], sequence[:, 1:]


def flat_cross_entropy(logits, targets):
    return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def make():
    torch.manual_seed(0)
    model = TinyLM()
    return model, text_batch(torch.Generator().manual_seed(43)), flat_cross_entropy, torch.optim.AdamW(
        model.parameters(), lr=3e-3)


def main():
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(44)
    model = TinyLM()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for step in range(60):
        inputs, targets = text_batch(generator)
        optimizer.zero_grad(set_to_none=True)
        loss = flat_cross_entropy(model(inputs), targets)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if step % 20 == 0:
            print(f"step {step}: loss {loss.item():.4f}")
    print("tied:", model.lm_head.weight is model.embedding.weight, "keys:", len(model.state_dict()))


if __name__ == "__main__":
    main()
