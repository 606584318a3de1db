"""Overhead of torchdoctor's cross-rank checks on a 2-process gloo DDP job (CPU).

Two ranks on 127.0.0.1 train the same DDP MLP. Each round runs three modes, in a rotating
order (interleaved, so that a slower stretch of the shared machine hits every mode):

* *bare*: no torchdoctor;
* *monitor*: ``torchdoctor.watch()`` attached with no detector selected (the hooks alone);
* *cross-rank*: ``torchdoctor.watch()`` with only the cross-rank rules selected (TD801,
  TD803, TD810-TD812), at the default check schedule (steps 1, 2, 4, ..., 32, then every
  64; ``TORCHDOCTOR_DIST_EVERY`` changes the interval).

Each mode times ``--steps`` optimizer steps on rank 0 (wall clock, after the two ranks
meet at a barrier). Printed: the median over rounds of each mode's time over bare, the
cross-rank checks' own cost (cross-rank over monitor), and what the checks measured
themselves (seconds inside the checks, exchanges and bytes sent per rank). Run with
``python benchmarks/bench_distributed.py [--steps 512 --rounds 5]``.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import time
import warnings
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

import torchdoctor

CROSS_RANK = ["TD801", "TD803", "TD810", "TD811", "TD812"]
MODES = ("bare", "monitor", "cross-rank")


def train(model: nn.Module, optimizer: Any, steps: int, x: Any, y: Any) -> float:
    dist.barrier()
    start = time.perf_counter()
    for _ in range(steps):
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
    return time.perf_counter() - start


def run_mode(
    mode: str, model: nn.Module, optimizer: Any, steps: int, x: Any, y: Any
) -> tuple[float, dict[str, Any]]:
    if mode == "bare":
        return train(model, optimizer, steps, x, y), {}
    select = CROSS_RANK if mode == "cross-rank" else ["TD002"]  # a lint-only rule: no detector
    with torchdoctor.watch(model, optimizer, select=select) as watched:
        seconds = train(model, optimizer, steps, x, y)
    return seconds, watched.report.facts


def worker(rank: int, world: int, port: int, steps: int, rounds: int) -> None:
    os.environ.update(
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world)
    )
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = DDP(
        nn.Sequential(
            nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)
        )
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))
    run_mode("bare", model, optimizer, 20, x, y)  # warm-up
    times: dict[str, list[float]] = {mode: [] for mode in MODES}
    facts: dict[str, Any] = {}
    for index in range(rounds):
        order = MODES[index % 3 :] + MODES[: index % 3]
        for mode in order:
            seconds, found = run_mode(mode, model, optimizer, steps, x, y)
            times[mode].append(seconds)
            if mode == "cross-rank":
                facts = found
    if rank == 0:
        report(times, facts, steps, rounds)
    dist.destroy_process_group()


def report(times: dict[str, list[float]], facts: dict[str, Any], steps: int, rounds: int) -> None:
    bare = times["bare"]

    def ratio(mode: str, base: list[float]) -> float:
        return statistics.median(t / b for t, b in zip(times[mode], base, strict=True))

    step_ms = statistics.median(bare) / steps * 1e3
    print(f"2 ranks, gloo, DDP MLP 256-512-512-10, batch 64; {steps} steps x {rounds} rounds")
    print(f"bare step: {step_ms:.2f} ms (median)")
    print(f"monitor only / bare:     {ratio('monitor', bare):.3f}")
    print(f"cross-rank / bare:       {ratio('cross-rank', bare):.3f}")
    print(
        f"cross-rank / monitor:    {ratio('cross-rank', times['monitor']):.3f}"
        "  (the cross-rank checks' own cost)"
    )
    checks = facts.get("cross_rank_checks", 0)
    busy = float(facts.get("cross_rank_seconds", 0.0))
    print(
        f"checks in the last round: {checks}, {busy * 1e3:.2f} ms inside them "
        f"({busy / max(statistics.median(bare), 1e-9):.2%} of the bare run), "
        f"{facts.get('cross_rank_bytes', 0)} bytes sent by this rank"
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    mp.spawn(worker, args=(2, free_port(), args.steps, args.rounds), nprocs=2)


if __name__ == "__main__":
    main()
