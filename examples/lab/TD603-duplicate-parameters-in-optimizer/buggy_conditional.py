"""A denoiser fine-tuned with an optional text encoder, whose optimizer repeats one module.

The parameters are chosen by a conditional expression: the denoiser alone, or the denoiser
and the text encoder. The second branch was written by copy-paste and lists the denoiser
twice, so with `--train-text-encoder` the text encoder is in no optimizer (its loss term
moves nothing) and the denoiser's weights are updated twice per step.
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
        itertools.chain(denoiser.parameters(), denoiser.parameters())
        if args.train_text_encoder
        else denoiser.parameters()
    )
    optimizer = torch.optim.AdamW(params, lr=1e-4)  # expect[lint]: TD603
    for _ in range(5):
        tokens = torch.randint(0, 100, (8,))
        noisy = torch.randn(8, 16)
        loss = (denoiser(noisy + text_encoder(tokens)) - noisy).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
