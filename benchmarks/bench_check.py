"""Cost of a full ``torchdoctor.check``, in plain training steps of the same model.

For a ResNet-18-sized CNN (11.2 M parameters, written out here so torchvision is not
needed) and a small Transformer encoder, this times one plain training step (forward,
loss, backward, optimizer step; median of several after a warm-up) and a full ``check``
(every probe, on a DataLoader, median of ``--repeats``), and prints their ratio with the
slowest probes. The aim is a check costing no more than about 30 plain steps. Run with
``python benchmarks/bench_check.py``.

Wall and CPU time are both printed: on a shared machine wall time depends on the other
processes, CPU time much less. The plain step is timed with torch's default thread count
and with one thread, and the faster counts (``check`` picks the faster the same way): on
a machine whose cores are busy, a multi-threaded step can be many times slower than a
single-threaded one, which would flatter the ratio.
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


def step_seconds(setup: tuple[Any, ...], steps: int) -> tuple[float, float, int]:
    """Median wall and CPU time of one plain training step on the loader's first batch,
    at the faster of torch's default thread count and one thread (and that count)."""
    default = torch.get_num_threads()
    best: tuple[float, float, int] | None = None
    for threads in sorted({default, 1}, reverse=True):
        torch.set_num_threads(threads)
        try:
            wall, cpu = _median_step(setup, steps)
        finally:
            torch.set_num_threads(default)
        if best is None or wall < best[0]:
            best = (wall, cpu, threads)
    assert best is not None
    return best


def _median_step(setup: tuple[Any, ...], steps: int) -> tuple[float, float]:
    model, loader, loss_fn, optimizer = setup
    inputs, targets = next(iter(loader))
    walls, cpus = [], []
    for index in range(steps + 2):
        begin, begin_cpu = time.perf_counter(), time.process_time()
        optimizer.zero_grad()
        loss_fn(model(inputs), targets).backward()
        optimizer.step()
        if index >= 2:  # the first steps allocate optimizer state and warm caches
            walls.append(time.perf_counter() - begin)
            cpus.append(time.process_time() - begin_cpu)
    return statistics.median(walls), statistics.median(cpus)


def check_seconds(make: Callable[[int], tuple[Any, ...]], batch: int, repeats: int
                  ) -> tuple[float, float, dict[str, Any]]:
    """Median wall and CPU time of a full check, and the facts of the last run."""
    walls, cpus, facts = [], [], {}
    for _ in range(repeats):
        torch.manual_seed(0)
        setup = make(batch)
        begin, begin_cpu = time.perf_counter(), time.process_time()
        report = torchdoctor.check(*setup)
        walls.append(time.perf_counter() - begin)
        cpus.append(time.process_time() - begin_cpu)
        facts = report.facts
    return statistics.median(walls), statistics.median(cpus), facts


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
        step, step_cpu, threads = step_seconds(make(args.batch), args.steps)
        total, total_cpu, facts = check_seconds(make, args.batch, args.repeats)
        slowest = sorted(facts["probe_seconds"].items(), key=lambda item: -item[1])[:4]
        print(f"{name:18s} step {step * 1000:8.1f} ms ({threads} threads, cpu "
              f"{step_cpu * 1000:.0f} ms)   check {total:6.2f} s (cpu {total_cpu:.2f} s, "
              f"{facts.get('threads', '?')} threads)   = {total / step:5.1f} steps "
              f"(cpu {total_cpu / step_cpu:5.1f})")
        print("    slowest probes: " + ", ".join(f"{p} {s / step:.1f} steps"
                                                  for p, s in slowest))


if __name__ == "__main__":
    main()
