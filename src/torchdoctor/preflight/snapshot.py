"""Save and restore everything ``check`` could disturb, bitwise.

:class:`Snapshot` records the model's parameters and buffers (values and the objects
themselves), ``requires_grad`` flags, ``.grad`` tensors, every module's train/eval mode and
plain attributes (:mod:`torchdoctor.preflight.attributes`), the optimizer's state and
parameter groups, the tensors it holds that are not the model's (a learned temperature),
every hook registry (:mod:`torchdoctor.preflight.hooks`), and the process's random number
generators and global torch modes and flags (:mod:`torchdoctor.preflight.process`).
:meth:`Snapshot.restore` puts all of it back, in place where possible, so references the
user holds (an optimizer's parameter list, a grad tensor) stay valid.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torchdoctor.preflight.attributes import AttributeState, attribute_differences
from torchdoctor.preflight.hooks import HookState, hook_differences
from torchdoctor.preflight.process import ProcessState, process_differences

__all__ = ["Snapshot", "state_differences"]


@dataclass(frozen=True, slots=True)
class _TensorSlot:
    """A tensor attribute of one module: the object that was there and a copy of it."""

    module: Any  # None for a tensor the optimizer holds outside the model
    name: str
    kind: str  # "_parameters", "_buffers" or "optimizer"
    original: Any  # the tensor object (or None)
    values: Any  # a detached clone of its data (or None)
    requires_grad: bool
    grad: Any  # the .grad object (or None)
    grad_values: Any


class Snapshot:
    """The restorable state of a model, an optimizer and the process's RNGs."""

    def __init__(self, model: Any, optimizer: Any | None = None) -> None:
        import torch

        self._model = model
        self._optimizer = optimizer
        with torch.no_grad():
            self._slots = [
                _save_slot(m, n, kind)
                for m in model.modules()
                for kind in ("_parameters", "_buffers")
                for n in list(getattr(m, kind).keys())
            ]
            self._slots += _loose_slots(model, optimizer)
        self._modes = [(module, module.training) for module in model.modules()]
        self._attributes = AttributeState(list(model.modules()))
        self._optimizer_state = _save_optimizer(optimizer) if optimizer is not None else None
        self._hooks = HookState(
            list(model.modules()),
            [
                slot.original
                for slot in self._slots
                if slot.kind != "_buffers" and slot.original is not None
            ],
            optimizer,
        )
        self._process = ProcessState()

    def restore(self) -> None:
        """Put every recorded value back. Safe to call more than once."""
        import torch

        with torch.no_grad():
            for slot in self._slots:
                _restore_slot(slot)
        for module, training in self._modes:
            module.training = training
        self._attributes.restore()
        if self._optimizer is not None:
            _restore_optimizer(self._optimizer, self._optimizer_state)
        self._hooks.restore()
        self._process.restore()


def _clone(tensor: Any) -> Any:
    return None if tensor is None else tensor.detach().clone()


def _save_slot(module: Any, name: str, kind: str, tensor: Any = None) -> _TensorSlot:
    if module is not None:
        tensor = getattr(module, kind)[name]
    grad = getattr(tensor, "grad", None) if kind != "_buffers" and tensor is not None else None
    return _TensorSlot(
        module,
        name,
        kind,
        tensor,
        _clone(tensor),
        bool(getattr(tensor, "requires_grad", False)),
        grad,
        _clone(grad),
    )


def _loose_slots(model: Any, optimizer: Any | None) -> list[_TensorSlot]:
    """Slots for the tensors an optimizer trains that are not the model's parameters.

    The shared training pass writes their ``.grad`` when the loss uses them.
    """
    if optimizer is None:
        return []
    owned = {id(p) for p in model.parameters()}
    loose: dict[int, Any] = {}
    for index, group in enumerate(optimizer.param_groups):
        for position, tensor in enumerate(group["params"]):
            if id(tensor) not in owned:
                loose.setdefault(id(tensor), (f"param_groups[{index}][{position}]", tensor))
    return [_save_slot(None, name, "optimizer", tensor) for name, tensor in loose.values()]


def _copy_into(target: Any, values: Any) -> None:
    """Write ``values`` into ``target`` keeping its storage when shapes and types allow."""
    if (
        target.shape == values.shape
        and target.dtype == values.dtype
        and target.device == values.device
    ):
        target.copy_(values)
    else:  # a probe changed its shape, dtype or device: swap the data back instead
        target.data = values.clone()


def _restore_slot(slot: _TensorSlot) -> None:
    if slot.module is not None:
        getattr(slot.module, slot.kind)[slot.name] = slot.original
    tensor = slot.original
    if tensor is None:
        return
    _copy_into(tensor, slot.values)
    if tensor.requires_grad != slot.requires_grad and tensor.is_leaf:
        tensor.requires_grad_(slot.requires_grad)
    if slot.kind == "_buffers":
        return
    if slot.grad is not None:
        _copy_into(slot.grad, slot.grad_values)
    tensor.grad = slot.grad


def _save_optimizer(optimizer: Any) -> dict[str, Any]:
    state = {}
    for param, entries in optimizer.state.items():
        state[param] = (
            entries,
            {
                key: (value, _clone(value) if _is_tensor(value) else value)
                for key, value in entries.items()
            },
        )
    groups = [(group, dict(group), list(group["params"])) for group in optimizer.param_groups]
    return {"state": state, "groups": groups, "group_list": list(optimizer.param_groups)}


def _restore_optimizer(optimizer: Any, saved: dict[str, Any] | None) -> None:
    assert saved is not None
    optimizer.param_groups[:] = saved["group_list"]
    for group, contents, params in saved["groups"]:
        group.clear()
        group.update(contents)
        group["params"] = params
    for param in [p for p in optimizer.state if p not in saved["state"]]:
        del optimizer.state[param]
    for param, (entries, values) in saved["state"].items():
        entries.clear()
        for key, (original, copy) in values.items():
            if _is_tensor(original):
                _copy_into(original, copy)
            entries[key] = original
        optimizer.state[param] = entries


def _is_tensor(value: Any) -> bool:
    import torch

    return isinstance(value, torch.Tensor)


def state_differences(before: Snapshot, after: Snapshot) -> list[str]:
    """What differs, bitwise, between two snapshots of the same objects (for tests).

    Returns:
        One line per difference; empty when the states are identical.
    """
    problems: list[str] = []
    for old, new in zip(before._slots, after._slots, strict=False):
        where = (
            f"{type(old.module).__name__}.{old.name}"
            if old.module is not None
            else (f"optimizer {old.name}")
        )
        if old.original is not new.original:
            problems.append(f"{where}: a different tensor object")
        if not _same_bits(old.values, new.values):
            problems.append(f"{where}: values differ")
        if old.requires_grad != new.requires_grad:
            problems.append(f"{where}: requires_grad differs")
        if old.grad is not new.grad or not _same_bits(old.grad_values, new.grad_values):
            problems.append(f"{where}: .grad differs")
    if len(before._slots) != len(after._slots):
        problems.append("the set of parameters and buffers differs")
    problems += [
        f"{type(m).__name__}: training={t} then {t2}"
        for (m, t), (_, t2) in zip(before._modes, after._modes, strict=False)
        if t != t2
    ]
    problems += attribute_differences(before._attributes, after._attributes)
    problems += _optimizer_differences(before._optimizer_state, after._optimizer_state)
    problems += hook_differences(before._hooks, after._hooks)
    problems += process_differences(before._process, after._process)
    return problems


def _same_bits(first: Any, second: Any) -> bool:
    import torch

    if first is None or second is None:
        return first is None and second is None
    if first.shape != second.shape or first.dtype != second.dtype:
        return False
    if first.device.type == "meta":
        return bool(second.device.type == "meta")
    # Compare raw bytes so NaN equals NaN and -0.0 differs from 0.0.
    return bool(torch.equal(_raw_bytes(first), _raw_bytes(second)))


def _raw_bytes(tensor: Any) -> Any:
    import torch

    return tensor.contiguous().reshape(-1).view(torch.uint8)


def _optimizer_differences(first: Any, second: Any) -> list[str]:
    if first is None or second is None:
        return [] if first is second else ["optimizer presence differs"]
    problems = []
    if set(first["state"]) != set(second["state"]):
        problems.append("optimizer state holds different parameters")
    for param, (_, values) in first["state"].items():
        other = second["state"].get(param, (None, {}))[1]
        for key, (_, copy) in values.items():
            twin = other.get(key, (None, None))[1]
            same = _same_bits(copy, twin) if _is_tensor(copy) else copy == twin
            if not same:
                problems.append(f"optimizer state {key!r} differs")
    for (_, contents, params), (_, contents2, params2) in zip(
        first["groups"], second["groups"], strict=False
    ):
        if {k: v for k, v in contents.items() if k != "params"} != {
            k: v for k, v in contents2.items() if k != "params"
        } or params != params2:
            problems.append("optimizer param_groups differ")
    return problems
