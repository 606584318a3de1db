"""Details of data errors: bad class indices and token ids, dead or failing loader workers."""

from __future__ import annotations

import ast
import linecache
from typing import Any

from torchdoctor.runtime.exceptions.facts import Detail, ErrorFacts
from torchdoctor.runtime.exceptions.frames import FrameRef

__all__ = [
    "class_index",
    "collate_sizes",
    "device_assert",
    "embedding_index",
    "loader_loop_line",
    "worker_died",
    "worker_raised",
]

_SIGNAL_ADVICE = {
    "Killed": (
        "The operating system killed the worker, almost always for host memory: "
        "lower `num_workers` or `prefetch_factor`, and keep the Dataset's samples in "
        "NumPy arrays or tensors rather than Python lists of objects, which every "
        "worker copies as it touches them."
    ),
    "Bus error": (
        "The workers ran out of shared memory (/dev/shm): raise it (`docker run "
        "--shm-size=8g` or `--ipc=host`), or lower `num_workers`."
    ),
    "Segmentation fault": (
        "Native code crashed inside the worker (an image/audio decoder, a "
        "C extension, a corrupt file): run with `num_workers=0` to get the "
        "crash in the main process, and validate inputs before decoding."
    ),
    "Aborted": (
        "Native code aborted inside the worker: run with `num_workers=0` to see its error message."
    ),
}


def _tensor_range(value: Any, ignore: Any = None) -> tuple[int, int] | None:
    """``(min, max)`` of a CPU integer tensor, leaving out ``ignore``; ``None`` otherwise."""
    try:
        if value is None or value.device.type != "cpu" or value.numel() == 0:
            return None
        if value.is_floating_point():
            return None
        kept = value[value != ignore] if ignore is not None else value
        if kept.numel() == 0:
            return None
        return int(kept.min()), int(kept.max())
    except Exception:  # noqa: BLE001 - reading user tensors must never fail the report
        return None


def class_index(facts: ErrorFacts) -> Detail:
    """``Target 10 is out of bounds.`` from ``cross_entropy`` / ``nll_loss``."""
    bad = int(facts.group("target")) if facts.group("target") else None
    frame = facts.frame_named("nll_loss", "cross_entropy", "nll_loss2d", "nll_loss_nd")
    classes = None
    span = None
    if frame is not None:
        output, target = frame.local("input"), frame.local("target")
        shape = list(getattr(output, "shape", []))
        classes = shape[1] if len(shape) >= 2 else (shape[0] if shape else None)
        span = _tensor_range(target, frame.local("ignore_index"))
    summary = "a class index in the targets is outside the range the model outputs"
    if classes is not None:
        summary += f": the output has {classes} classes (0..{classes - 1})"
    if span is not None:
        summary += f" and the batch's targets span {span[0]}..{span[1]}"
    elif bad is not None:
        summary += f", and the batch holds target {bad}"
    fixes: list[str] = []
    low = span[0] if span else bad
    high = span[1] if span else bad
    if low is not None and low < 0:
        fixes.append(
            f"Targets of {low} look like padding: pass `ignore_index={low}` to the loss "
            "(the default ignores -100 only)."
        )
    if classes is not None and high is not None and high == classes:
        fixes.append(
            f"Labels seem to run 1..{classes}: subtract 1 from them, or give the "
            f"output layer {classes + 1} classes."
        )
    if classes is not None and high is not None and high >= classes:
        fixes.append(
            f"Build the output layer with `num_classes = max label + 1` "
            f"({high + 1}), computed from the whole dataset."
        )
    if not fixes:
        fixes.append(
            "Check `targets.min() >= 0` and `targets.max() < num_classes` over the "
            "dataset and size the output layer from it."
        )
    evidence = {"target": bad, "classes": classes, "target_span": list(span) if span else None}
    return Detail(summary, tuple(fixes), evidence)


def embedding_index(facts: ErrorFacts) -> Detail | None:
    """``index out of range in self`` raised inside an embedding lookup."""
    frame = facts.frame_named("embedding")
    if frame is None:
        return None
    weight, indices = frame.local("weight"), frame.local("input")
    rows = int(weight.shape[0]) if getattr(weight, "shape", None) is not None else None
    span = _tensor_range(indices)
    summary = "an embedding lookup received an index outside its table"
    named = facts.module.described if facts.module else "the table"
    if rows is not None:
        summary = f"{named} has {rows} rows but received an index outside 0..{rows - 1}"
    if span is not None:
        summary += f" (indices span {span[0]}..{span[1]})"
    size = span[1] + 1 if span else "the vocabulary size"
    fixes = (
        f"Build the embedding with `num_embeddings` = the vocabulary size ({size}), and "
        "make sure the tokenizer and the model use the same vocabulary; map unknown ids "
        "to an `<unk>` index.",
    )
    return Detail(summary, fixes, {"rows": rows, "index_span": list(span) if span else None})


def device_assert(facts: ErrorFacts) -> Detail:
    """``CUDA error: device-side assert triggered``."""
    summary = (
        "a CUDA kernel's assertion failed; CUDA reports it asynchronously, so the "
        "failing line may come after the real cause"
    )
    fixes = (
        "Rerun with `CUDA_LAUNCH_BLOCKING=1` (or on the CPU) to get the real line.",
        "The usual causes are a class index >= the number of classes (check "
        "`targets.max() < num_classes`) and a token id >= an embedding's "
        "`num_embeddings`.",
    )
    return Detail(summary, fixes, {})


def loader_loop_line(frame: FrameRef | None) -> int | None:
    """The line of the ``for`` statement iterating a DataLoader around ``frame``'s line.

    A worker's death reaches the main process through a signal, at whatever line it was
    running; the loop over the loader is the place the user recognises.
    """
    if frame is None or frame.frame is None:
        return None
    loaders = {
        name for name, value in frame.frame.f_locals.items() if type(value).__name__ == "DataLoader"
    }
    try:
        tree = ast.parse("".join(linecache.getlines(frame.path)))
    except (SyntaxError, ValueError):
        return None
    best: int | None = None
    for node in ast.walk(tree):
        if not isinstance(node, (ast.For, ast.AsyncFor)):
            continue
        inside = node.lineno <= frame.line <= (node.end_lineno or node.lineno)
        names = {n.id for n in ast.walk(node.iter) if isinstance(n, ast.Name)}
        iterates = bool(names & loaders) or "DataLoader" in ast.unparse(node.iter)
        if inside and iterates and (best is None or node.lineno > best):
            best = node.lineno
    return best


def worker_died(facts: ErrorFacts) -> Detail:
    """``DataLoader worker (pid 123) is killed by signal: Killed.`` / ``exited unexpectedly``."""
    signal = facts.group("signal").strip().rstrip(".")
    pids = facts.group("pids").strip()
    if signal:
        summary = f"DataLoader worker (pid {pids}) was killed by signal {signal}"
    else:
        summary = f"DataLoader worker (pid {pids}) exited unexpectedly"
    advice = _SIGNAL_ADVICE.get(
        signal, "Run with `num_workers=0` to see the worker's own error in the main process."
    )
    fixes = (advice,)
    return Detail(
        summary,
        fixes,
        {"worker_pids": pids, "signal": signal or None},
        line=loader_loop_line(facts.user),
        asynchronous=True,
    )


def worker_raised(facts: ErrorFacts) -> Detail:
    """``Caught ValueError in DataLoader worker process 0.`` plus the original traceback."""
    last = [line for line in facts.text.strip().splitlines() if line.strip()][-1].strip()
    where = f" at {facts.user.where}" if facts.user else ""
    summary = (
        f"the Dataset or collate code raised `{facts.group('error')}` in DataLoader "
        f"worker {facts.group('worker')}{where}: {last}"
    )
    fixes = (
        f"Fix the error in the Dataset code{where}; set `num_workers=0` to debug it in "
        "the main process with an ordinary traceback.",
    )
    return Detail(summary, fixes, {"worker": int(facts.group("worker")), "original_error": last})


def collate_sizes(facts: ErrorFacts) -> Detail:
    """``stack expects each tensor to be equal size, but got [3, 32, 32] at entry 0 and ...``."""
    first, second = facts.group("first"), facts.group("second")
    summary = (
        f"the DataLoader could not batch samples of different shapes ([{first}] and [{second}])"
    )
    fixes = (
        "Resize or crop every sample to one shape in the Dataset's transform, or pass a "
        "`collate_fn` that pads variable-length samples (`pad_sequence`).",
    )
    return Detail(summary, fixes, {"shapes": [first, second]})
