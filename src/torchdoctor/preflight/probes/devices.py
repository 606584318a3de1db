"""Probe 1, devices: parameters, buffers, module tensors and the batch on one device."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from torchdoctor._kernel import Reporter
from torchdoctor.findings import Depth, Finding, Location, Severity
from torchdoctor.preflight.batch import iter_tensors
from torchdoctor.preflight.context import CheckContext
from torchdoctor.preflight.registry import probe
from torchdoctor.preflight.relocation import find_stray_tensor
from torchdoctor.rules.registry import finding

__all__ = ["device_mismatch"]

_MOVE_HINT = (
    "Register constant tensors with `self.register_buffer(name, tensor)` and create "
    "tensors inside `forward` with `device=x.device`, so `model.to(device)` moves "
    "them with the parameters."
)


def _own_tensors(module: Any) -> Iterator[tuple[str, Any]]:
    import torch

    for name, param in module.named_parameters(recurse=False):
        yield name, param
    for name, buffer in module.named_buffers(recurse=False):
        yield name, buffer
    for name, value in vars(module).items():
        if isinstance(value, torch.Tensor) and not name.startswith("_"):
            yield name, value


def _split_modules(ctx: CheckContext) -> Iterator[Finding]:
    """A module whose own tensors sit on several devices: one of them was left behind."""
    for path, module in ctx.model.named_modules():
        devices: dict[str, list[str]] = {}
        for name, tensor in _own_tensors(module):
            devices.setdefault(str(tensor.device), []).append(name)
        if len(devices) < 2:
            continue
        spread = "; ".join(f"{', '.join(names)} on {device}" for device, names in devices.items())
        yield finding(
            "TD101",
            f"Module `{ctx.name(path)}` ({type(module).__name__}) holds tensors on "
            f"{len(devices)} devices: {spread}. Its forward will fail or silently "
            "copy every step.",
            Location(object=ctx.name(path)),
            Depth.CHECK,
            fix_hint=_MOVE_HINT,
            evidence={"devices": {d: names for d, names in devices.items()}},
        )


def _model_devices(ctx: CheckContext) -> set[str]:
    return {str(t.device) for t in (*ctx.model.parameters(), *ctx.model.buffers())}


def _model_not_moved(ctx: CheckContext) -> Iterator[Finding]:
    """Training sends batches to a device the model's parameters are not on."""
    import torch

    model_devices = _model_devices(ctx)
    if not model_devices or ctx.requested_device is None:
        return
    wanted = ctx.device
    if any(
        torch.device(d) == wanted or (torch.device(d).type == wanted.type and wanted.index is None)
        for d in model_devices
    ):
        return
    yield finding(
        "TD101",
        f"Batches go to {wanted} but the model's parameters are on "
        f"{', '.join(sorted(model_devices))}: the first forward raises.",
        Location(object=ctx.name("")),
        Depth.CHECK,
        fix_hint=f"Call `model.to({str(wanted)!r})` before building the optimizer.",
        evidence={"batch_device": str(wanted), "model_devices": sorted(model_devices)},
    )


def _batch_elsewhere(ctx: CheckContext) -> Iterator[Finding]:
    """A batch already on an accelerator while the model is somewhere else."""
    if ctx.requested_device is not None:
        return
    model_devices = _model_devices(ctx)
    for name, tensor in iter_tensors(ctx.batch_as_given.inputs, "inputs"):
        if tensor.device.type != "cpu" and str(tensor.device) not in model_devices:
            yield finding(
                "TD101",
                f"`{name}` (shape {list(tensor.shape)}) is on {tensor.device} but the "
                f"model's parameters are on {', '.join(sorted(model_devices))}.",
                Location(object=name),
                Depth.CHECK,
                fix_hint="Move the model and every batch to the same device "
                "(`model.to(device)`, `x.to(device)`).",
                evidence={
                    "tensor_device": str(tensor.device),
                    "model_devices": sorted(model_devices),
                },
            )
            return


def _simulated_move(ctx: CheckContext) -> Iterator[Finding]:
    """On a CPU-only setup, a tensor that would not follow ``model.to(device)``."""
    if _model_devices(ctx) != {"cpu"}:
        return
    stray = find_stray_tensor(ctx)
    if stray is None:
        return
    what = (
        f"plain attribute `{stray.attribute}` (not a registered buffer)"
        if stray.attribute
        else "a tensor created on the CPU inside the forward"
    )
    yield finding(
        "TD101",
        f"The forward breaks once the model moves to a GPU: `{stray.function}` "
        f"receives {what}, shape {list(stray.shape)}, which stays on the CPU when "
        '`model.to(device)` moves the parameters, so the forward raises "Expected '
        'all tensors to be on the same device".',
        stray.location,
        Depth.CHECK,
        severity=Severity.WARNING,
        fix_hint=_MOVE_HINT,
        evidence={
            "function": stray.function,
            "shape": list(stray.shape),
            "attribute": stray.attribute,
            "simulated": "model.to('meta')",
        },
    )


@probe("TD101")
def device_mismatch(ctx: CheckContext, out: Reporter) -> None:
    """TD101: tensors the model needs live, or would live, on different devices."""
    found = [*_split_modules(ctx), *_model_not_moved(ctx), *_batch_elsewhere(ctx)]
    for item in found:
        out.emit(item)
    if not found:
        for item in _simulated_move(ctx):
            out.emit(item)
