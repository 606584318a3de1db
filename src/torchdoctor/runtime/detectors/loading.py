"""A ``load_state_dict(..., strict=False)`` that matched few of the keys it was given
(TD904 at run time; ``lint`` finds the call whose result is thrown away), and a load given
the module's own tensors (TD912 at run time; ``lint`` finds the snapshot).

The invariant: what a loose load is given, it loads. ``strict=False`` is meant for a
checkpoint that covers part of a model (a backbone without its new head, adapter weights),
not for one whose keys do not fit (``module.`` or ``_orig_mod.`` prefixes, a renamed
attribute): then nothing is loaded, the model keeps its random initial weights, and the
call says so only in the result the code usually drops. ``Module.load_state_dict`` is
wrapped for the run: the call runs unchanged and its result is returned unchanged; only
its counts are read (keys given, keys left unexpected, keys of the model missing).

Policy for correct programs that look alike: a partial checkpoint whose keys all fit (a
backbone, LoRA weights: few of the model's keys, none of the checkpoint's unused) is
quiet, whatever share of the model it covers; so is a load made by a library on the
user's behalf (its caller is not the user's code), and a strict load (it raises itself).

The same wrapper checks a second invariant (TD912 at run time): a load restores values
from somewhere else, so the tensors it is given are never the module's own. A dict whose
every tensor shares storage with the module's parameters and buffers is a ``state_dict()``
kept without a copy (``best_state = model.state_dict()``): later steps updated it in
place, and the load changes nothing. ``assign=True`` (the module takes the given tensors)
is left alone: after it the storages match by design.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from torchdoctor.findings import Depth, Report
from torchdoctor.rules.detectors import detector
from torchdoctor.rules.registry import finding
from torchdoctor.runtime.detectors.base import MonitorView, RuntimeDetector
from torchdoctor.runtime.patches import Patches, after_call

__all__ = ["LooseLoad"]

_UNUSED_SHARE = 0.5  # of the given keys left unexpected: the checkpoint does not fit
_SHOWN = 3


@detector("TD904", "TD912", depth=Depth.RUN)
class LooseLoad(RuntimeDetector):
    """Reads every ``load_state_dict`` made by the user: the result of a loose one, and
    whether the tensors given were the module's own."""

    def __init__(self) -> None:
        self._patches = Patches(alive=self.attached)
        self._error: BaseException | None = None

    def on_attach(self, monitor: MonitorView) -> None:
        super().on_attach(monitor)
        import torch

        self._patches.wrap(
            torch.nn.Module,
            "load_state_dict",
            after_call(self._patches, self._loaded, self._failed),
        )

    def _failed(self, error: BaseException) -> None:
        self._error = error

    def _loaded(self, result: Any, module: Any, state_dict: Any, *args: Any, **kwargs: Any) -> None:
        if not isinstance(state_dict, Mapping) or not len(state_dict):
            return
        caller = sys._getframe(2)  # here, the wrapper, then whoever called load_state_dict
        if not self.monitor.is_user_file(caller.f_code.co_filename):
            return
        if not kwargs.get("assign", args[1] if len(args) > 1 else False):
            self._check_own_tensors(module, state_dict, caller)
        strict = kwargs.get("strict", args[0] if args else True)
        if strict:
            return
        unexpected = list(getattr(result, "unexpected_keys", ()) or ())
        missing = list(getattr(result, "missing_keys", ()) or ())
        given = len(state_dict)
        matched = given - len(unexpected)
        if matched > 0 and len(unexpected) < _UNUSED_SHARE * given:
            return
        self.emit(
            finding(
                "TD904",
                f"`load_state_dict(..., strict=False)` on `{type(module).__name__}` loaded "
                f"{matched} of the {given} keys it was given ({len(unexpected)} unexpected, "
                f"such as {_some(unexpected)}; {len(missing)} of the model's keys missing, "
                f"such as {_some(missing)}): the checkpoint does not fit the model, and the "
                "parts it was meant to fill keep their initial weights",
                self.monitor.user_location(caller, object=type(module).__name__),
                Depth.RUN,
                fix_hint="Rename the checkpoint's keys to the model's (strip a `module.` or "
                "`_orig_mod.` prefix, map renamed attributes), then load with "
                "`strict=True`, or check `missing_keys` and `unexpected_keys` in the result.",
                evidence={
                    "keys_given": given,
                    "keys_loaded": matched,
                    "unexpected_keys": unexpected[:20],
                    "missing_keys": missing[:20],
                },
            )
        )

    def _check_own_tensors(self, module: Any, state_dict: Mapping[str, Any], caller: Any) -> None:
        # The module's own tensors by name, without calling its state_dict(): that may run
        # hooks or, under FSDP, collectives, which a check must never start.
        own = dict(module.named_parameters())
        own.update(module.named_buffers())
        compared = shared = 0
        for key, value in state_dict.items():
            mine = own.get(key)
            here, there = _storage(value), _storage(mine)
            if mine is None or here is None or there is None:
                continue
            compared += 1
            shared += here == there and value.shape == mine.shape
        if not compared or shared < compared:
            return
        name = type(module).__name__
        self.emit(
            finding(
                "TD912",
                f"`load_state_dict(...)` on `{name}` was given the module's own tensors "
                f"(all {compared} of the given tensors share storage with its parameters "
                "and buffers), so it changes nothing: the dict is a `state_dict()` kept "
                "without a copy, which every optimizer step since updated in place, and "
                "the weights it was taken to keep are gone",
                self.monitor.user_location(caller, object=name),
                Depth.RUN,
                fix_hint="Copy the snapshot when taking it: "
                "`copy.deepcopy(model.state_dict())` (or clone each tensor).",
                evidence={"tensors_given": compared, "tensors_shared": shared},
            )
        )

    def on_finish(self, report: Report) -> None:
        self._patches.remove()
        if self._error is not None:
            raise self._error  # a failure of ours in the wrapper: one TD001, as elsewhere


def _storage(value: Any) -> int | None:
    """Where a dense tensor's data starts; ``None`` for anything else (not a tensor, empty,
    on the meta device, sparse or a subclass without plain storage)."""
    import torch

    if not isinstance(value, torch.Tensor) or not value.numel() or value.is_meta:
        return None
    try:
        pointer = value.data_ptr()
    except (RuntimeError, NotImplementedError):
        return None
    return pointer or None


def _some(keys: list[str]) -> str:
    if not keys:
        return "none"
    return ", ".join(f"`{k}`" for k in keys[:_SHOWN]) + (" ..." if len(keys) > _SHOWN else "")
