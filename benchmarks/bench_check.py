"""Cost of a full ``torchdoctor.check``, in plain training steps of the same model.

For a ResNet-18-sized CNN (11.2 M parameters, written out here so torchvision is not
needed) and a small Transformer encoder, this times one plain training step (forward,
loss, backward, optimizer step; median of several after a warm-up) and a full ``check``
(every probe, on a DataLoader, median of ``--repeats``), and prints their ratio with the
slowest probes. The aim is a check costing no more than about 30 plain steps. Run with
``python benchmarks/bench_check.py``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import torchdoctor


class BasicBlock(nn.Module):
    """The two-convolution residual block of ResNet-18."""

    def __init__(self, channels_in: int, channels: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels_in, channels, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.shortcut = nn.Sequential()
        if stride != 1 or channels_in != channels:
            self.shortcut = nn.Sequential(nn.Conv2d(channels_in, channels, 1, stride, bias=False),
                                          nn.BatchNorm2d(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


class ResNet18(nn.Module):
    """ResNet-18's layout (64-128-256-512 channels, 2 blocks each) for 10 classes."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64),
                                  nn.ReLU())
        blocks, width = [], 64
        for channels, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            blocks += [BasicBlock(width, channels, stride), BasicBlock(channels, channels, 1)]
            width = channels
        self.blocks = nn.Sequential(*blocks)
        self.head = nn.Linear(512, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(self.stem(x)).mean(dim=(2, 3)))


class Encoder(nn.Module):
    """A 4-layer Transformer encoder classifier over 64-token sequences."""

    def __init__(self, vocab: int = 5000, classes: int = 4) -> None:
        super().__init__()
        self.tokens = nn.Embedding(vocab, 128)
        self.positions = nn.Embedding(64, 128)
        layer = nn.TransformerEncoderLayer(128, 4, 512, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 4)
        self.head = nn.Linear(128, classes)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(ids.shape[1], device=ids.device)
        return self.head(self.encoder(self.tokens(ids) + self.positions(positions)).mean(1))


def resnet_setup(batch: int) -> tuple[Any, ...]:
    model = ResNet18()
    images = torch.randn(batch * 4, 3, 32, 32)
    labels = torch.randint(0, 10, (batch * 4,))
    loader = DataLoader(TensorDataset(images, labels), batch_size=batch, shuffle=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    return model, loader, nn.CrossEntropyLoss(), optimizer


def transformer_setup(batch: int) -> tuple[Any, ...]:
    model = Encoder()
    ids = torch.randint(0, 5000, (batch * 4, 64))
    labels = torch.randint(0, 4, (batch * 4,))
    loader = DataLoader(TensorDataset(ids, labels), batch_size=batch, shuffle=True)
    return model, loader, nn.CrossEntropyLoss(), torch.optim.AdamW(model.parameters(), 3e-4)


def step_seconds(setup: tuple[Any, ...], steps: int) -> float:
    """Median wall time of one plain training step on the loader's first batch."""
    model, loader, loss_fn, optimizer = setup
    inputs, targets = next(iter(loader))
    times = []
    for index in range(steps + 2):
        begin = time.perf_counter()
        optimizer.zero_grad()
        loss_fn(model(inputs), targets).backward()
        optimizer.step()
        if index >= 2:  # the first steps allocate optimizer state and warm caches
            times.append(time.perf_counter() - begin)
    return statistics.median(times)


def check_seconds(make: Callable[[int], tuple[Any, ...]], batch: int, repeats: int
                  ) -> tuple[float, dict[str, float]]:
    """Median wall time of a full check, and the probe timings of the last run."""
    times, probes = [], {}
    for _ in range(repeats):
        torch.manual_seed(0)
        setup = make(batch)
        begin = time.perf_counter()
        report = torchdoctor.check(*setup)
        times.append(time.perf_counter() - begin)
        probes = report.facts["probe_seconds"]
    return statistics.median(times), probes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, batch {args.batch}")
    for name, make in (("resnet18-size CNN", resnet_setup), ("transformer", transformer_setup)):
        torch.manual_seed(0)
        step = step_seconds(make(args.batch), args.steps)
        total, probes = check_seconds(make, args.batch, args.repeats)
        slowest = sorted(probes.items(), key=lambda item: -item[1])[:4]
        print(f"{name:18s} step {step * 1000:8.1f} ms   check {total:6.2f} s   "
              f"= {total / step:5.1f} steps")
        print("    slowest probes: " + ", ".join(f"{p} {s / step:.1f} steps"
                                                  for p, s in slowest))


if __name__ == "__main__":
    main()
