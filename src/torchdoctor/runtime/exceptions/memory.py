"""Details of out-of-memory errors: how much was asked for, how much there was, and why."""

from __future__ import annotations

import os
import re
from typing import Any

from torchdoctor.runtime.exceptions.facts import Detail, ErrorFacts, format_bytes, torch_module

__all__ = ["out_of_memory", "parse_size", "spent_on"]

_UNITS = {
    "B": 1,
    "KB": 1000,
    "MB": 1000**2,
    "GB": 1000**3,
    "TB": 1000**4,
    "KIB": 1024,
    "MIB": 1024**2,
    "GIB": 1024**3,
    "TIB": 1024**4,
    "PIB": 1024**5,
}
_SIZE = r"[\d.]+ ?[KMGTP]?i?B"
_FIELDS = {
    "requested": re.compile(rf"Tried to allocate ({_SIZE})|tried to allocate (\d+) bytes"),
    "total": re.compile(rf"total capacity of ({_SIZE})|({_SIZE}) total capacity"),
    "free": re.compile(rf"of which ({_SIZE}) is free|({_SIZE}) free;"),
    "unallocated": re.compile(rf"({_SIZE}) is reserved by PyTorch but unallocated"),
}
_DEVICE_TYPES = {"CUDA": "cuda", "HIP": "cuda", "MPS": "mps", "XPU": "xpu"}
# A request this many times the whole memory is a wrong shape, not a tight budget.
_ABSURD_FACTOR = 4


def parse_size(text: str) -> int | None:
    """``"2.00 GiB"`` -> bytes; a bare number is bytes; ``None`` when unreadable."""
    match = re.fullmatch(r"([\d.]+) ?([KMGTP]?i?B)?", text.strip())
    if not match:
        return None
    unit = (match.group(2) or "B").upper()
    return int(float(match.group(1)) * _UNITS.get(unit, 1))


def _field(text: str, name: str) -> int | None:
    match = _FIELDS[name].search(text)
    if not match:
        return None
    value = next(group for group in match.groups() if group)
    return parse_size(value)


def _host_memory() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not on every platform
        return None


def _device_kind(facts: ErrorFacts) -> str:
    text = facts.text
    for kind in ("CUDA", "HIP", "MPS", "XPU"):
        if f"{kind} out of memory" in text or f"{kind} backend out of memory" in text:
            return kind
    return "host (CPU)"


def out_of_memory(facts: ErrorFacts) -> Detail:
    """CUDA/HIP/MPS OOM, the CPU allocator's failure and Python's ``MemoryError``."""
    kind = _device_kind(facts)
    requested = _field(facts.text, "requested")
    total = _field(facts.text, "total") or (_host_memory() if kind.startswith("host") else None)
    free, unallocated = _field(facts.text, "free"), _field(facts.text, "unallocated")
    evidence: dict[str, Any] = {
        "device": kind,
        "requested_bytes": requested,
        "total_bytes": total,
        "free_bytes": free,
        "reserved_unallocated_bytes": unallocated,
        **_peak(),
    }
    where = f" while {facts.module_label} was running" if facts.module else ""
    summary = f"the run ran out of {kind} memory{where}"
    spent = spent_on(facts.models, facts.optimizers, _DEVICE_TYPES.get(kind, "cpu"))
    if spent:
        evidence["memory_breakdown"] = spent
    if requested:
        summary += f": one allocation asked for {format_bytes(requested)}"
        if free is not None and total:
            summary += f" with {format_bytes(free)} free of {format_bytes(total)}"
        elif total:
            summary += (
                f"; the {'machine' if kind.startswith('host') else 'device'} has "
                f"{format_bytes(total)}"
            )
    if requested and total and requested > _ABSURD_FACTOR * total:
        summary += (
            f" (the request is {requested / total:,.0f}x that): a tensor shape is "
            "wrong, this is not a tuning problem"
        )
        fixes: tuple[str, ...] = (
            "Print the shapes of the tensors at the failing line: look for a dimension that "
            "should be a batch or context size but is a dataset size, or an accidental "
            "broadcast of [N] against [N, 1] into [N, N].",
        )
        return Detail(summary, fixes, evidence)
    if spent:
        summary += "; " + _spent_sentence(spent)
    fixes_list = [
        "Lower the batch size (use gradient accumulation to keep the effective batch).",
        "Train in mixed precision (`torch.autocast`) and use activation checkpointing "
        "(`torch.utils.checkpoint`) for the largest blocks.",
        "Log losses with `loss.item()`: keeping loss tensors keeps their graphs alive.",
    ]
    if unallocated and total and unallocated >= max(requested or 0, total // 20):
        fixes_list.insert(
            0,
            f"{format_bytes(unallocated)} is reserved but unallocated "
            "(fragmentation): set "
            "`PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`.",
        )
    return Detail(summary, tuple(fixes_list), evidence)


def _peak() -> dict[str, int]:
    torch = torch_module()
    cuda = getattr(torch, "cuda", None)
    try:
        if cuda is not None and cuda.is_initialized():
            return {
                "cuda_peak_allocated_bytes": int(cuda.max_memory_allocated()),
                "cuda_reserved_bytes": int(cuda.memory_reserved()),
            }
    except Exception:  # noqa: BLE001 - after a CUDA error the runtime may refuse every call
        return {}
    return {}


def spent_on(models: Any, optimizers: Any, device_type: str) -> dict[str, int]:
    """What the live model and optimizer hold on ``device_type`` at the failure, in the
    categories of ``check --forecast``: ``parameters`` (and buffers), ``gradients`` and
    ``optimizer_state``, each storage counted once; on CUDA also ``allocated`` (everything
    the caching allocator has handed out) and ``other`` (the rest: activations saved for
    backward, temporaries, batches). Empty when nothing is known."""
    torch = torch_module()
    if torch is None or not (models or optimizers):
        return {}
    seen: set[tuple[str, int]] = set()
    spent = {"parameters": 0, "gradients": 0, "optimizer_state": 0}

    def count(tensor: Any, category: str) -> None:
        if not isinstance(tensor, torch.Tensor) or tensor.device.type != device_type:
            return
        storage = tensor.untyped_storage()
        key = (str(tensor.device), storage.data_ptr())
        if key not in seen:
            seen.add(key)
            spent[category] += int(storage.nbytes())

    for model in models:
        for tensor in (*model.parameters(), *model.buffers()):
            count(tensor, "parameters")
            count(tensor.grad, "gradients")
    for optimizer in optimizers:
        for group in optimizer.param_groups:
            for param in group["params"]:
                count(param, "parameters")
                count(param.grad, "gradients")
        for state in optimizer.state.values():
            for value in state.values():
                count(value, "optimizer_state")
    if device_type == "cuda":
        try:
            spent["allocated"] = int(torch.cuda.memory_allocated())
        except Exception:  # noqa: BLE001 - after a CUDA error the runtime may refuse calls
            return spent if any(spent.values()) else {}
        spent["other"] = max(
            0,
            spent["allocated"]
            - sum(spent[key] for key in ("parameters", "gradients", "optimizer_state")),
        )
    return spent if any(spent.values()) else {}


def _spent_sentence(spent: dict[str, int]) -> str:
    parts = [
        f"{name} {format_bytes(spent[key])}"
        for key, name in (
            ("parameters", "parameters"),
            ("gradients", "gradients"),
            ("optimizer_state", "optimizer state"),
        )
    ]
    if "other" in spent:
        parts.append(f"activations and temporaries {format_bytes(spent['other'])}")
        return (
            f"of the {format_bytes(spent['allocated'])} allocated: "
            + ", ".join(parts)
            + " (`torchdoctor check --forecast cuda` measures this per batch size)"
        )
    return "the model and optimizer hold " + ", ".join(parts)
