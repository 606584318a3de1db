"""Overhead of the runtime monitor on CPU: step time with and without ``torchdoctor.watch``.

Trains an MLP, a small CNN and a small Transformer. For each model the runs are
interleaved (bare, watched from the start, watched in steady state, anomaly mode, in a
rotating order, several rounds). Each watched run is a fresh ``watch()``: *start* times its
first ``--steps`` optimizer steps, where discovery and the dense sampling of the first
steps are paid; *steady* first lets ``--warmup`` steps pass untimed inside the watch and
times the next ``--steps``, which is what every later stretch of a long run costs. Each
ratio is the median over rounds of the run's time over the bare run's, next to the same
ratio for ``torch.autograd.detect_anomaly()``. Times are process CPU time, which time
stolen by other processes on a shared machine does not inflate (torch runs one thread);
the wall-clock ratio is printed beside it. The monitor's own time in its hooks (measured by
the monitor itself, ``facts["monitor_time_s"]``) is printed as a share of each watched run
and per optimizer step of that run: the direct cost, without the noise of the ratios. Run
with ``python benchmarks/bench_runtime.py``.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

import torchdoctor


def mlp() -> tuple[nn.Module, Callable[[], tuple[Any, Any]], nn.Module]:
    model = nn.Sequential(
        nn.Flatten(),
        nn.Linear(784, 512),
        nn.ReLU(),
        nn.Dropout(0.1),
        nn.Linear(512, 256),
        nn.ReLU(),
        nn.Linear(256, 10),
    )
    x, y = torch.randn(64, 1, 28, 28), torch.randint(0, 10, (64,))
    return model, lambda: (x, y), nn.CrossEntropyLoss()


def cnn() -> tuple[nn.Module, Callable[[], tuple[Any, Any]], nn.Module]:
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),
        nn.BatchNorm2d(16),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1),
        nn.BatchNorm2d(32),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(32 * 8 * 8, 10),
    )
    x, y = torch.randn(16, 3, 32, 32), torch.randint(0, 10, (16,))
    return model, lambda: (x, y), nn.CrossEntropyLoss()


class TinyTransformer(nn.Module):
    """A two-layer encoder classifier over token ids."""

    def __init__(self, vocab: int = 1000, width: int = 128) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        layer = nn.TransformerEncoderLayer(width, 4, 4 * width, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(width, 10)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        scores: torch.Tensor = self.head(self.encoder(self.embed(tokens)).mean(dim=1))
        return scores


def transformer() -> tuple[nn.Module, Callable[[], tuple[Any, Any]], nn.Module]:
    x, y = torch.randint(0, 1000, (8, 32)), torch.randint(0, 10, (8,))
    return TinyTransformer(), lambda: (x, y), nn.CrossEntropyLoss()


def run(
    model: nn.Module,
    batch: Callable[[], tuple[Any, Any]],
    loss_fn: nn.Module,
    optimizer: torch.optim.Optimizer,
    steps: int,
) -> None:
    for _ in range(steps):
        x, y = batch()
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()


def timed(
    mode: str,
    model: nn.Module,
    batch: Any,
    loss_fn: nn.Module,
    optimizer: torch.optim.Optimizer,
    steps: int,
    warmup: int,
) -> tuple[float, float, float, float]:
    """CPU time and wall time of ``steps`` steps in one mode, the monitor's own share of
    the whole watched run, and its own time per optimizer step of that run (seconds)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # anomaly mode warns that it is on
        if mode in ("start", "steady"):
            with torchdoctor.watch() as watched:
                begin = time.perf_counter()
                if mode == "steady":
                    run(model, batch, loss_fn, optimizer, warmup)
                cpu, wall = _time(model, batch, loss_fn, optimizer, steps)
                total = time.perf_counter() - begin
            own = float(watched.report.facts["monitor_time_s"])
            watched_steps = steps + (warmup if mode == "steady" else 0)
            return cpu, wall, own / total, own / watched_steps
        if mode == "anomaly":
            with torch.autograd.detect_anomaly():
                return (*_time(model, batch, loss_fn, optimizer, steps), 0.0, 0.0)
        return (*_time(model, batch, loss_fn, optimizer, steps), 0.0, 0.0)


def _time(
    model: nn.Module, batch: Any, loss_fn: nn.Module, optimizer: torch.optim.Optimizer, steps: int
) -> tuple[float, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    run(model, batch, loss_fn, optimizer, steps)
    return time.process_time() - cpu, time.perf_counter() - wall


def bench(name: str, factory: Any, steps: int, warmup: int, rounds: int) -> dict[str, float]:
    torch.manual_seed(0)
    model, batch, loss_fn = factory()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    run(model, batch, loss_fn, optimizer, 10)  # warm up allocator and kernels
    times: dict[str, list[tuple[float, float, float, float]]] = {
        "bare": [],
        "start": [],
        "steady": [],
        "anomaly": [],
    }
    modes = list(times)
    for index in range(rounds):
        turn = index % len(modes)
        for mode in modes[turn:] + modes[:turn]:
            times[mode].append(timed(mode, model, batch, loss_fn, optimizer, steps, warmup))

    def ratio(mode: str, clock: int) -> float:
        return statistics.median(
            t[clock] / b[clock] for t, b in zip(times[mode], times["bare"], strict=True)
        )

    step_ms = statistics.median(t[0] for t in times["bare"]) / steps * 1e3
    result = {"step_ms": step_ms, "anomaly": ratio("anomaly", 0)}
    for mode in ("start", "steady"):
        result[mode] = ratio(mode, 0)
        result[f"{mode}_wall"] = ratio(mode, 1)
        result[f"{mode}_own"] = statistics.median(t[2] for t in times[mode])
        result[f"{mode}_us"] = statistics.median(t[3] for t in times[mode]) * 1e6
    print(
        f"{name:12s} step {step_ms:6.2f} ms   "
        + "   ".join(
            f"{mode} x{result[mode]:.3f} (wall x{result[f'{mode}_wall']:.3f}, "
            f"in hooks {result[f'{mode}_own']:.1%} = {result[f'{mode}_us']:.0f} us/step)"
            for mode in ("start", "steady")
        )
        + f"   detect_anomaly x{result['anomaly']:.2f}"
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100, help="optimizer steps per run")
    parser.add_argument(
        "--warmup",
        type=int,
        default=300,
        help="untimed steps inside the watch before a steady-state run",
    )
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(
        f"torch {torch.__version__}, {args.threads} thread(s), {args.steps} steps x "
        f"{args.rounds} rounds (steady: after {args.warmup} steps); ratios are medians of "
        "watched/bare CPU times per run"
    )
    results = {
        name: bench(name, factory, args.steps, args.warmup, args.rounds)
        for name, factory in (("mlp", mlp), ("cnn", cnn), ("transformer", transformer))
    }
    for mode in ("start", "steady"):
        worst = max(r[mode] for r in results.values())
        print(f"worst {mode} overhead: x{worst:.3f} (target <= x1.03)")


if __name__ == "__main__":
    main()
