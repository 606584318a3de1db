"""Loops that draw no data: the same step repeated to time it, or within one batch.

:func:`draws_batch` says that a loop takes a batch itself (``next(it)``);
:func:`measures_a_repeated_step` that a loop repeats one step on the same inputs while
its function reads a clock or the memory counters around it (a benchmark of a layer's
speed or memory, not a training run: what the updates do to the weights is never used).
"""

from __future__ import annotations

import ast

from torchdoctor.static.context import FileContext
from torchdoctor.static.structure import Loop

__all__ = ["draws_batch", "measures_a_repeated_step"]

# Clocks and memory counters a benchmark reads before and after the steps it measures.
_MEASUREMENTS = frozenset(
    {
        "time.time",
        "time.perf_counter",
        "time.monotonic",
        "time.process_time",
        "timeit.default_timer",
        "torch.cuda.max_memory_allocated",
        "torch.cuda.max_memory_reserved",
        "torch.cuda.max_memory_cached",
        "torch.cuda.memory_allocated",
        "torch.cuda.memory_reserved",
        "torch.cuda.reset_peak_memory_stats",
        "torch.cuda.reset_max_memory_allocated",
        "torch.cuda.reset_max_memory_cached",
    }
)
# Read by their last name: NVML's memory query, a CUDA event's elapsed time.
_MEASURING_METHODS = frozenset({"nvmlDeviceGetMemoryInfo", "elapsed_time"})


def draws_batch(loop: Loop) -> bool:
    """A ``next(...)`` (or ``.next()``/``.__next__()``) call directly in the loop."""
    for item in loop.items:
        if not loop.is_direct(item):
            continue
        for node in ast.walk(item.node):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if isinstance(func, ast.Name) and func.id == "next":
                return True
            if isinstance(func, ast.Attribute) and func.attr in ("next", "__next__"):
                return True
    return False


def measures_a_repeated_step(ctx: FileContext, loop: Loop) -> bool:
    """``for _ in range(n)`` whose counter the body never reads and which draws no batch,
    in a function that reads a clock or a memory counter after the loop: every pass runs
    the same step on the same tensors, to measure it."""
    node = loop.node
    if not (
        isinstance(node, ast.For)
        and isinstance(node.iter, ast.Call)
        and isinstance(node.iter.func, ast.Name)
        and node.iter.func.id == "range"
    ):
        return False
    counters = {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
    if any(
        isinstance(n, ast.Name) and n.id in counters and isinstance(n.ctx, ast.Load)
        for statement in node.body
        for n in ast.walk(statement)
    ):
        return False
    if draws_batch(loop):
        return False
    end = node.end_lineno or node.lineno
    scope = loop.function
    body = scope.node if scope is not None else ctx.tree
    return any(
        isinstance(call, ast.Call) and call.lineno > end and _measures(ctx, call, loop)
        for call in ast.walk(body)
    )


def _measures(ctx: FileContext, call: ast.Call, loop: Loop) -> bool:
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr in _MEASURING_METHODS:
        return True
    if isinstance(func, ast.Name) and func.id in _MEASURING_METHODS:
        return True
    return ctx.is_call_to(call, *_MEASUREMENTS, scope=loop.function)
