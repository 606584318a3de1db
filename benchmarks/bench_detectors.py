"""Each runtime detector's own time in its hooks, per optimizer step.

Trains a 19-layer MLP with BatchNorm under ``torchdoctor.watch()`` (AdamW; ``--frozen``
freezes the first layer) and times every call the monitor makes into each detector: its
hooks, and its deferred read-backs (``Dispatcher.guarded``). Prints microseconds per step
and the share of the step time per detector, largest first: the cost of one invariant,
without the noise of whole-run ratios. Times are the thread's CPU time, which other
processes on a shared machine do not inflate. ``--warmup N`` leaves the first N steps untimed
(one-time costs: the first graph read imports ``torch.compiler``). ``--accumulate K`` makes
each step accumulate K backward passes; ``--lstm`` trains a sequence-first LSTM on
time-major batches instead. A detector's own module pre-hook (TD109's, removed once its
layers are judged) is not a dispatcher call: it shows in the step time only. Run with
``python benchmarks/bench_detectors.py [--steps N] [--warmup N] [--frozen]
[--accumulate K] [--lstm]``.
"""

from __future__ import annotations

import argparse
import collections
import time
from typing import Any

import torch
from torch import nn

import torchdoctor
from torchdoctor.runtime import dispatch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--frozen", action="store_true", help="freeze the first layer")
    parser.add_argument("--show", type=int, default=12, help="detectors shown")
    parser.add_argument("--accumulate", type=int, default=1, help="backward passes a step")
    parser.add_argument("--lstm", action="store_true", help="a sequence-first LSTM")
    parser.add_argument(
        "--warmup", type=int, default=0, help="steps run before timing (one-time costs)"
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    spent: collections.Counter[str] = collections.Counter()
    original = dispatch.Dispatcher.guarded

    def timed(self: Any, detector: Any, callback: Any, *rest: Any) -> None:
        start = time.thread_time()
        try:
            original(self, detector, callback, *rest)
        finally:
            spent[type(detector).__name__] += time.thread_time() - start

    def timed_hook(method: Any, name: str) -> Any:
        def hook(argument: Any) -> None:
            start = time.thread_time()
            try:
                method(argument)
            finally:
                spent[name] += time.thread_time() - start

        return hook

    original_add = dispatch.Dispatcher._add

    def timed_add(self: Any, detector: Any, codes: Any) -> None:
        original_add(self, detector, codes)
        name = type(detector).__name__
        for hook, entries in self.hooks.items():
            self.hooks[hook] = [
                (d, timed_hook(m, name) if d is detector else m) for d, m in entries
            ]

    dispatch.Dispatcher.guarded = timed  # type: ignore[method-assign]
    dispatch.Dispatcher._add = timed_add  # type: ignore[method-assign]
    torch.manual_seed(0)
    model, x, y = _workload(args.lstm)
    if args.frozen:
        next(model.parameters()).requires_grad_(False)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    start = time.thread_time()
    with torchdoctor.watch():
        for index in range(args.warmup + args.steps):
            if index == args.warmup:
                spent.clear()
                start = time.thread_time()
            optimizer.zero_grad()
            for _ in range(args.accumulate):
                nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
    step = (time.thread_time() - start) / args.steps
    dispatch.Dispatcher.guarded = original  # type: ignore[method-assign]
    dispatch.Dispatcher._add = original_add  # type: ignore[method-assign]
    print(
        f"{args.steps} steps of {step * 1e3:.2f} ms; detectors in total "
        f"{sum(spent.values()) / args.steps * 1e6:.1f} us/step"
    )
    for name, seconds in spent.most_common(args.show):
        per_step = seconds / args.steps
        print(f"  {name:32s} {per_step * 1e6:8.2f} us/step  {per_step / step:8.4%} of a step")


class _Reader(nn.Module):
    """A sequence-first LSTM over time-major batches, classified from its last step."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(32, 128, 2)
        self.head = nn.Linear(128, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.lstm(x.transpose(0, 1))[0][-1])


def _workload(lstm: bool) -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    if lstm:
        return _Reader(), torch.randn(64, 20, 32), torch.randint(0, 10, (64,))
    layers = [m for _ in range(6) for m in (nn.Linear(256, 256), nn.BatchNorm1d(256), nn.ReLU())]
    model = nn.Sequential(*layers, nn.Linear(256, 10))
    return model, torch.randn(64, 256), torch.randint(0, 10, (64,))


if __name__ == "__main__":
    main()
