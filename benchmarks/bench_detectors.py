"""Each runtime detector's own time in its hooks, per optimizer step.

Trains a 19-layer MLP with BatchNorm under ``torchdoctor.watch()`` (AdamW; ``--frozen``
freezes the first layer) and times every call the monitor makes into each detector
(``Dispatcher.guarded``). Prints microseconds per step and the share of the step time per
detector, largest first: the cost of one invariant, without the noise of whole-run ratios.
Run with ``python benchmarks/bench_detectors.py [--steps N] [--frozen]``.
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
    args = parser.parse_args()
    torch.set_num_threads(1)
    spent: collections.Counter[str] = collections.Counter()
    original = dispatch.Dispatcher.guarded

    def timed(self: Any, detector: Any, callback: Any, *rest: Any) -> None:
        start = time.perf_counter()
        try:
            original(self, detector, callback, *rest)
        finally:
            spent[type(detector).__name__] += time.perf_counter() - start

    dispatch.Dispatcher.guarded = timed  # type: ignore[method-assign]
    torch.manual_seed(0)
    layers = [m for _ in range(6) for m in (nn.Linear(256, 256), nn.BatchNorm1d(256), nn.ReLU())]
    model = nn.Sequential(*layers, nn.Linear(256, 10))
    if args.frozen:
        model[0].requires_grad_(False)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))
    start = time.perf_counter()
    with torchdoctor.watch():
        for _ in range(args.steps):
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
    step = (time.perf_counter() - start) / args.steps
    dispatch.Dispatcher.guarded = original  # type: ignore[method-assign]
    print(
        f"{args.steps} steps of {step * 1e3:.2f} ms; detectors in total "
        f"{sum(spent.values()) / args.steps * 1e6:.1f} us/step"
    )
    for name, seconds in spent.most_common(args.show):
        per_step = seconds / args.steps
        print(f"  {name:32s} {per_step * 1e6:8.2f} us/step  {per_step / step:8.4%} of a step")


if __name__ == "__main__":
    main()
