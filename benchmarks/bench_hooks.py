"""The monitor's own cost in its hooks, without the noise of a shared machine.

Runs ``bench_runtime``'s models in its steady window (a fresh ``watch()``, ``--warmup`` +
``--steps`` optimizer steps) and reports, per model, the CPU time spent inside the
monitor's hooks (thread CPU time, so time stolen by other processes is not counted) per
step and as a share of the run's CPU time, the median of ``--rounds`` runs. With
``--opcodes`` it counts instead the Python opcodes the hooks execute per step
(``sys.settrace``; the sampling schedule held fixed, so the count is the same from run to
run): a figure to compare two versions of the code on any machine. Run
``python benchmarks/bench_hooks.py`` once per version (``PYTHONPATH=<version>/src``),
alternating versions.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import torch

import torchdoctor
from torchdoctor.runtime import events, sampling

sys.path.insert(0, str(Path(__file__).parent))
import bench_runtime  # noqa: E402


class HookMeter:
    """Wraps the monitor's hook guard: CPU seconds inside it, or opcodes run inside it."""

    def __init__(self, opcodes: bool) -> None:
        self.seconds = 0.0
        self.opcodes = 0
        original = events.EventHandlers._guard
        meter = self

        def _guard(handlers: Any, function: Any, where: str, *args: Any) -> None:
            start = time.thread_time()
            if opcodes:
                sys.settrace(meter._trace)
            try:
                original(handlers, function, where, *args)
            finally:
                if opcodes:
                    sys.settrace(None)
                meter.seconds += time.thread_time() - start

        events.EventHandlers._guard = _guard  # type: ignore[method-assign]
        if opcodes:  # the cost guard reads the clock: hold the schedule fixed
            cost = sampling.Sampler.sample_cost

            def fixed(sampler: sampling.Sampler, seconds: float) -> None:
                cost(sampler, seconds)
                sampler._cost_interval = 1

            sampling.Sampler.sample_cost = fixed  # type: ignore[method-assign]

    def _trace(self, frame: FrameType, event: str, arg: Any) -> Callable[..., Any]:
        frame.f_trace_opcodes = True
        return self._count

    def _count(self, frame: FrameType, event: str, arg: Any) -> Callable[..., Any]:
        if event == "opcode":
            self.opcodes += 1
        return self._count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=120)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--opcodes", action="store_true", help="count opcodes, not time")
    args = parser.parse_args()
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    meter = HookMeter(args.opcodes)
    steps = args.warmup + args.steps
    results = []
    for name, factory in (
        ("mlp", bench_runtime.mlp),
        ("cnn", bench_runtime.cnn),
        ("transformer", bench_runtime.transformer),
    ):
        torch.manual_seed(0)
        model, batch, loss_fn = factory()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        bench_runtime.run(model, batch, loss_fn, optimizer, 10)
        shares, per_step = [], []
        for _ in range(1 if args.opcodes else args.rounds):
            meter.seconds, meter.opcodes = 0.0, 0
            start = time.thread_time()
            with torchdoctor.watch():
                bench_runtime.run(model, batch, loss_fn, optimizer, steps)
            total = time.thread_time() - start
            shares.append(meter.seconds / total)
            per_step.append(meter.opcodes / steps if args.opcodes else meter.seconds / steps * 1e6)
        if args.opcodes:
            results.append(f"{name} {statistics.median(per_step):,.0f} opcodes/step")
        else:
            share, micro = statistics.median(shares), statistics.median(per_step)
            results.append(f"{name} {share:.1%} ({micro:.0f} us/step)")
    print(" | ".join(results))


if __name__ == "__main__":
    main()
