"""Cost of TD506's run-time wrapper around the functional dropouts.

Times forward passes of two small models, bare, inside ``torchdoctor.watch()`` with
TD506 ignored (its wrapper is then not installed), and inside ``watch()``, in interleaved
rounds (process CPU time, median over rounds); TD506's cost is the last over the second:

* ``layer``: ``nn.Dropout`` layers, which pass ``training`` (the path every correct
  model takes: one length test in the wrapper);
* ``default``: ``F.dropout(x, p)`` without ``training`` in a module in training mode (the
  path that looks up the stack for the module, on every call);
* ``eval``: the same module in eval mode after the finding (a set lookup per call).

Both models use tiny tensors so that the wrapper's Python cost is not hidden by the
arithmetic: these ratios are the worst case. ``--width 512`` shows a more usual layer.
Run with ``python benchmarks/bench_dropout.py``.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

import torchdoctor


class Layered(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.blocks = nn.Sequential(
            *[nn.Sequential(nn.Linear(width, width), nn.Dropout(0.1)) for _ in range(4)]
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.blocks(x)


class Functional(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = F.dropout(layer(x), 0.1)
        return x


def _forwards(model: nn.Module, x: torch.Tensor, calls: int) -> float:
    start = time.process_time()
    with torch.no_grad():
        for _ in range(calls):
            model(x)
    return time.process_time() - start


def _case(
    make: Callable[[], nn.Module], train: bool, width: int, calls: int
) -> tuple[float, float, float]:
    x = torch.randn(8, width)
    model = make().train(train)
    bare = _forwards(model, x, calls)
    with warnings.catch_warnings(), torchdoctor.watch(ignore=["TD506"]):
        without = _forwards(model, x, calls)
    with warnings.catch_warnings(), torchdoctor.watch():
        watched = _forwards(model, x, calls)
    return bare, without, watched


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=int, default=16)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    cases = {
        "layer": (lambda: Layered(args.width), True),
        "default": (lambda: Functional(args.width), True),
        "eval": (lambda: Functional(args.width), False),
    }
    print(f"width {args.width}, {args.calls} forwards of 4 dropouts each, {args.rounds} rounds")
    for name, (make, train) in cases.items():
        runs = [_case(make, train, args.width, args.calls) for _ in range(args.rounds)]
        bare_us = statistics.median(b / args.calls for b, _, _ in runs) * 1e6
        rest = statistics.median(o / b for b, o, _ in runs)
        ours = statistics.median(w / o for _, o, w in runs)
        per_call = statistics.median((w - o) / (args.calls * 4) for _, o, w in runs) * 1e6
        print(
            f"{name:8s} forward {bare_us:6.1f} µs bare; the monitor without TD506 ×{rest:.2f}; "
            f"TD506 on top ×{ours:.2f}, {per_call:+.2f} µs a dropout call"
        )


if __name__ == "__main__":
    main()
