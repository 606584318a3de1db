"""A denoiser fine-tuned with an optional text encoder, each module given to the optimizer once.

The two branches of the conditional expression are alternatives: with
`--train-text-encoder` the optimizer takes the denoiser and the text encoder, otherwise
the denoiser alone. The denoiser appears in both branches but is given once either way.
"""

import argparse
import itertools

import torch
from torch import nn


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--train-text-encoder", action="store_true")
    args = parser.parse_args()
    denoiser = nn.Sequential(nn.Linear(16, 32), nn.SiLU(), nn.Linear(32, 16))
    text_encoder = nn.Embedding(100, 16)
    params = (
        itertools.chain(denoiser.parameters(), text_encoder.parameters())
        if args.train_text_encoder
        else denoiser.parameters()
    )
    optimizer = torch.optim.AdamW(params, lr=1e-4)
    for _ in range(5):
        tokens = torch.randint(0, 100, (8,))
        noisy = torch.randn(8, 16)
        loss = (denoiser(noisy + text_encoder(tokens)) - noisy).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
