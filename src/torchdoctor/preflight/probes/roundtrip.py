"""Save/load round trip: state that a ``state_dict`` does not carry (TD908).

A copy of the model takes one training step; its ``state_dict`` goes to bytes and back
(``weights_only=True``) into a second copy as it was before the step, the way a checkpoint
is loaded into a freshly built model. The probe names what lives outside the
``state_dict`` (plain tensor attributes, numbers and non-persistent buffers that the step
changed) and confirms with the two copies' eval outputs.
"""

from __future__ import annotations

import io
import numbers
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from torchdoctor._kernel import Reporter
from torchdoctor.findings import Confidence, Depth, Finding, Location, Severity
from torchdoctor.preflight.probes.modes import RELATIVE_TOLERANCE, largest_difference
from torchdoctor.preflight.registry import probe
from torchdoctor.preflight.training import CopyUnavailable, copy_for_training, train_step
from torchdoctor.rules.registry import finding

if TYPE_CHECKING:
    from torchdoctor.preflight.context import CheckContext

MAX_FINDINGS = 10


@dataclass(frozen=True, slots=True)
class OutsideState:
    """One piece of module state that the ``state_dict`` leaves out."""

    name: str  # "norm.mean"
    kind: str  # "tensor attribute", "number attribute", "non-persistent buffer"
    value: Any  # a copy of the value before the step


def _storage(tensor: Any) -> int:
    return int(tensor.untyped_storage().data_ptr())


def outside_state(model: Any) -> dict[str, OutsideState]:
    """Tensors and numbers on the model's modules that ``state_dict()`` does not hold.

    Tensors that require grad or share storage with a parameter or buffer are left out:
    they are computed from saved state (pruning, spectral norm, a cached view).
    """
    import torch

    saved = {_storage(t) for t in (*model.parameters(), *model.buffers()) if t.numel()}
    found: dict[str, OutsideState] = {}
    for path, module in model.named_modules():
        prefix = f"{path}." if path else ""
        for key in sorted(getattr(module, "_non_persistent_buffers_set", ())):
            buffer = module._buffers.get(key)
            if buffer is not None:
                found[prefix + key] = OutsideState(
                    prefix + key, "non-persistent buffer", buffer.detach().clone()
                )
        for key, value in vars(module).items():
            if key == "training":
                continue
            if isinstance(value, torch.Tensor):
                if value.requires_grad or (value.numel() and _storage(value) in saved):
                    continue
                found[prefix + key] = OutsideState(
                    prefix + key, "tensor attribute", value.detach().clone()
                )
            elif isinstance(value, numbers.Number) and not isinstance(value, bool):
                found[prefix + key] = OutsideState(prefix + key, "number attribute", value)
    return found


def _same(first: Any, second: Any) -> bool:
    import torch

    if isinstance(first, torch.Tensor) or isinstance(second, torch.Tensor):
        return (
            isinstance(first, torch.Tensor)
            and isinstance(second, torch.Tensor)
            and first.shape == second.shape
            and torch.equal(first, second)
        )
    return bool(first == second)


def _round_trip(state_dict: dict[str, Any]) -> dict[str, Any]:
    import torch

    buffer = io.BytesIO()
    torch.save(state_dict, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=True)  # type: ignore[no-any-return]


@probe("TD908")
def state_outside_state_dict(ctx: CheckContext, out: Reporter) -> None:
    """Name the state that a state_dict save/load loses, confirmed by eval outputs."""
    ctx.train_pass.require_loss()
    try:
        fresh = copy_for_training(ctx, with_optimizer=False).model
        trained = copy_for_training(ctx)
    except CopyUnavailable:
        return
    before = outside_state(trained.model)
    train_step(trained, ctx.batch, ctx.seed)
    after = outside_state(trained.model)
    try:
        fresh.load_state_dict(_round_trip(trained.model.state_dict()))
    except Exception as error:  # noqa: BLE001 - what the user's checkpoint would hit too
        out.emit(_cannot_round_trip(ctx, error))
        return
    difference = _output_difference(ctx, trained.model, fresh)
    changed = [
        state
        for name, state in before.items()
        if name not in after or not _same(state.value, after[name].value)
    ]
    for state in changed[:MAX_FINDINGS]:
        now = after.get(state.name)
        matters = difference > RELATIVE_TOLERANCE and (
            len(changed) == 1 or _closes_gap(ctx, trained.model, fresh, now, difference)
        )
        out.emit(_changed(ctx, state, now, difference if matters else 0.0))
    changed_names = {state.name for state in changed}
    plain = [
        state
        for state in before.values()
        if state.kind == "tensor attribute" and state.name not in changed_names
    ]
    for state in plain[: max(0, MAX_FINDINGS - len(changed))]:
        out.emit(_plain_tensor(ctx, state))
    if not changed and difference > RELATIVE_TOLERANCE:
        out.emit(_unexplained(ctx, difference))


def _output_difference(ctx: CheckContext, trained: Any, loaded: Any) -> float:
    """How far the loaded copy's eval output is from the trained copy's; 0.0 when the
    trained copy itself is not reproducible in eval mode (then nothing can be compared)."""
    reference = ctx.forward(trained, train=False, grad=False)
    difference = largest_difference(reference, ctx.forward(loaded, train=False, grad=False))
    if difference > RELATIVE_TOLERANCE:
        again = ctx.forward(trained, train=False, grad=False)
        if largest_difference(reference, again) > RELATIVE_TOLERANCE:
            return 0.0
    return difference


def _closes_gap(
    ctx: CheckContext, trained: Any, loaded: Any, state: OutsideState | None, difference: float
) -> bool:
    """Whether giving the loaded copy the trained value of ``state`` alone brings its eval
    output closer to the trained copy's (so this piece of state is one that matters)."""
    if state is None:
        return False
    path, _, leaf = state.name.rpartition(".")
    module = loaded.get_submodule(path)
    store = module._buffers if state.kind == "non-persistent buffer" else vars(module)
    original = store[leaf]
    store[leaf] = state.value.clone() if hasattr(state.value, "clone") else state.value
    try:
        closer = largest_difference(
            ctx.forward(trained, train=False, grad=False),
            ctx.forward(loaded, train=False, grad=False),
        )
    finally:
        store[leaf] = original
    return closer < difference


def _show(value: Any) -> str:
    import torch

    if isinstance(value, torch.Tensor):
        return f"tensor{list(value.shape)}"
    return f"{value:.6g}" if isinstance(value, float) else repr(value)


def _changed(
    ctx: CheckContext, state: OutsideState, now: OutsideState | None, difference: float
) -> Finding:
    import torch

    moved = (
        ""
        if isinstance(state.value, torch.Tensor) or now is None
        else (f" ({_show(state.value)} -> {_show(now.value)})")
    )
    confirmed = difference > RELATIVE_TOLERANCE
    effect = (
        f"a copy loaded from its state_dict gives eval outputs that differ by up to "
        f"{difference:.3g} (relative)"
        if confirmed
        else "a model loaded from a checkpoint starts again from the initial value; the eval "
        "output does not depend on it, but training code may (a schedule, a counter)"
    )
    return finding(
        "TD908",
        f"`{ctx.name(state.name)}` ({state.kind}) changed in a training step{moved} "
        f"but is not in the state_dict: {effect}.",
        Location(object=ctx.name(state.name)),
        Depth.CHECK,
        severity=None if confirmed else Severity.INFO,
        confidence=Confidence.HIGH if confirmed else Confidence.MEDIUM,
        fix_hint=_hint(state),
        evidence={"kind": state.kind, "relative_difference": difference},
    )


def _hint(state: OutsideState) -> str:
    leaf = state.name.rpartition(".")[2]
    if state.kind == "non-persistent buffer":
        return f"Register `{leaf}` with `persistent=True` (the default) so it is saved."
    if state.kind == "number attribute":
        return (
            f"Keep `{leaf}` in a buffer (`self.register_buffer('{leaf}', "
            "torch.tensor(...))`) or return it from `get_extra_state()`."
        )
    return f"Register `{leaf}` as a buffer: `self.register_buffer('{leaf}', tensor)`."


def _plain_tensor(ctx: CheckContext, state: OutsideState) -> Finding:
    leaf = state.name.rpartition(".")[2]
    return finding(
        "TD908",
        f"`{ctx.name(state.name)}` is a plain tensor attribute "
        f"({_show(state.value)}), not a parameter or buffer: it is not saved in the "
        "state_dict and does not move with `model.to(device)`.",
        Location(object=ctx.name(state.name)),
        Depth.CHECK,
        severity=Severity.INFO,
        confidence=Confidence.MEDIUM,
        fix_hint=f"Register it as a buffer: `self.register_buffer('{leaf}', tensor)`, with "
        "`persistent=False` when `__init__` rebuilds it.",
        evidence={"kind": state.kind, "shape": list(state.value.shape)},
    )


def _cannot_round_trip(ctx: CheckContext, error: BaseException) -> Finding:
    return finding(
        "TD908",
        f"The model's state_dict does not survive a save and a "
        f"`torch.load(weights_only=True)` into a fresh copy: {type(error).__name__}: "
        f"{str(error).splitlines()[0] if str(error) else ''}",
        Location(object=ctx.name("")),
        Depth.CHECK,
        fix_hint="Keep only tensors (and plain numbers, strings, lists, dicts) in the "
        "state_dict: return such values from `get_extra_state()`.",
        evidence={"error": f"{type(error).__name__}: {error}"[:400]},
    )


def _unexplained(ctx: CheckContext, difference: float) -> Finding:
    return finding(
        "TD908",
        f"After one training step, a copy loaded from the state_dict gives eval "
        f"outputs that differ by up to {difference:.3g} (relative) from the trained copy, "
        "and no tensor or number attribute changed: the state lives in a container "
        "(list, dict), a closure or a global.",
        Location(object=ctx.name("")),
        Depth.CHECK,
        fix_hint="Keep every value the forward reads and training changes in a parameter or "
        "a buffer.",
        evidence={"relative_difference": difference},
    )
