"""Parameters that never get a gradient (TD208) or never change (TD218).

Only models that train (at least one parameter gets a gradient) are judged, and only
parameters that require grad: a backbone frozen on purpose (``requires_grad=False``) and a
teacher or EMA model without gradients are left alone. "Received a gradient" is checked at
every step on the shrinking set of parameters not seen with one yet, so a branch used once
in a while is not missed. "Never changed" compares each parameter's version counter and
norm at the end with those at discovery.
"""

from __future__ import annotations

from typing import Any

from torchdoctor.findings import Depth, Location, Report
from torchdoctor.rules.detectors import detector
from torchdoctor.rules.registry import finding
from torchdoctor.runtime.detectors.base import ModelInfo, RuntimeDetector, StepEvent
from torchdoctor.runtime.detectors.places import (
    assignment_location,
    display_path,
    group_by_module,
)
from torchdoctor.runtime.stats import norms

__all__ = ["ParameterCoverage"]

_MIN_STEPS = 3


@detector("TD208", "TD218", depth=Depth.RUN)
class ParameterCoverage(RuntimeDetector):
    """Names trainable parameters that get no gradient, or that no step ever changes."""

    def __init__(self) -> None:
        self._unseen: dict[int, Any] = {}      # requires grad, no gradient seen yet
        self._seen: dict[int, Any] = {}        # got a gradient at least once
        self._model: dict[int, ModelInfo] = {}
        self._version: dict[int, int] = {}
        self._initial_norm: dict[int, float] = {}
        self._steps = 0

    def on_model(self, model: ModelInfo) -> None:
        params = [p for p in model.inner.parameters() if p.requires_grad]
        for param in params:
            key = id(param)
            if key not in self._model:
                self._model[key] = model
                self._unseen[key] = param
                self._version[key] = param._version
        dense = [p for p in params if not p.is_sparse and p.is_floating_point()]
        if dense:
            torch = _torch()
            with torch.no_grad():
                vector = norms(torch, [p.detach() for p in dense])
            keys = [id(p) for p in dense]
            self.monitor.defer(vector, lambda values: self._initial_norm.update(
                zip(keys, values, strict=True)))

    def on_step_begin(self, event: StepEvent) -> None:
        self._steps = max(self._steps, event.global_step)
        if not self._unseen:
            return
        for key, param in list(self._unseen.items()):
            if param.grad is not None:
                del self._unseen[key]
                self._seen[key] = param

    def on_finish(self, report: Report) -> None:
        if self._steps < _MIN_STEPS:
            return
        trained = {id(self._model[key]) for key in self._seen}
        never = [p for k, p in self._unseen.items()
                 if id(self._model[k]) in trained and p.requires_grad]
        self._report_groups("TD208", never)
        unchanged = self._unchanged()
        in_optimizer = {id(p) for info in self.monitor.optimizers for p in info.params}
        self._report_groups("TD218", [p for p in unchanged if id(p) not in in_optimizer],
                            missing=True)
        self._report_groups("TD218", [p for p in unchanged if id(p) in in_optimizer])

    def _unchanged(self) -> list[Any]:
        candidates = [p for p in self._seen.values() if p.requires_grad]
        if not candidates:
            return []
        torch = _torch()
        dense = [p for p in candidates if not p.is_sparse and id(p) in self._initial_norm]
        with torch.no_grad():
            now = norms(torch, [p.detach() for p in dense]).tolist() if dense else []
        current = {id(p): value for p, value in zip(dense, now, strict=True)}
        return [p for p in candidates
                if p._version == self._version[id(p)]
                or current.get(id(p), float("nan")) == self._initial_norm.get(id(p))]

    def _report_groups(self, code: str, params: list[Any], missing: bool = False) -> None:
        by_model: dict[int, list[Any]] = {}
        for param in params:
            by_model.setdefault(id(self._model[id(param)]), []).append(param)
        for group in by_model.values():
            model = self._model[id(group[0])]
            for path, names in group_by_module(model.inner, group):
                self.emit(self._finding(code, model, path, names, missing))

    def _finding(self, code: str, model: ModelInfo, path: str, names: list[str],
                 missing: bool) -> Any:
        shown = display_path(self.monitor, model, path)
        what = f"`{shown}`" + (f" ({len(names)} parameters)" if len(names) > 1 else "")
        location = assignment_location(self.monitor, model, path, prefer_script=missing)
        location = location or Location(object=shown)
        evidence = {"parameters": names, "steps": self._steps}
        if code == "TD208":
            return finding(
                code, f"{what} requires grad but never received a gradient in "
                f"{self._steps} steps: it is not used on the way to the loss, or its output "
                "is detached", location, Depth.RUN,
                fix_hint="Use it in the forward pass that produces the loss, or freeze it "
                         "with `requires_grad_(False)` if it is unused on purpose.",
                evidence=evidence)
        if missing:
            return finding(
                code, f"{what} received gradients but never changed in {self._steps} steps: "
                "it is in no optimizer (was the optimizer built before this layer was "
                "created or replaced?)", location, Depth.RUN,
                fix_hint="Create the optimizer after the model is final, or add these "
                         "parameters with `optimizer.add_param_group({'params': ...})`.",
                evidence=evidence)
        return finding(
            code, f"{what} received gradients but kept its initial values over "
            f"{self._steps} steps of its optimizer: its learning rate is 0 or its gradients "
            "are always zero", location, Depth.RUN,
            fix_hint="Give its parameter group a non-zero learning rate, or find why its "
                     "gradient is zero.",
            evidence=evidence)


def _torch() -> Any:
    import torch

    return torch
