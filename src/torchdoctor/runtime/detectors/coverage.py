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

from torchdoctor.findings import Depth, Location, Report, Severity
from torchdoctor.rules.detectors import detector
from torchdoctor.rules.registry import finding
from torchdoctor.runtime.detectors.base import (
    ModelInfo,
    RuntimeDetector,
    StepEvent,
    StepSample,
)
from torchdoctor.runtime.detectors.places import (
    assignment_location,
    describe_params,
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
        self._grad_norm: dict[int, float] = {}
        self._lr: dict[int, float] = {}
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

    def on_sample(self, sample: StepSample) -> None:
        for param, norm, group in zip(sample.optimizer.params, sample.grad_norms,
                                      sample.group_of, strict=True):
            if norm is not None:
                key = id(param)
                self._grad_norm[key] = max(self._grad_norm.get(key, 0.0), norm)
                self._lr[key] = sample.lrs[group]

    def on_finish(self, report: Report) -> None:
        if self._steps < _MIN_STEPS:
            return
        trained = {id(self._model[key]) for key in self._seen}
        never = [p for k, p in self._unseen.items()
                 if id(self._model[k]) in trained and p.requires_grad]
        self._report("TD208", never, _NO_GRADIENT)
        unchanged = self._unchanged()
        owners = {id(p): info for info in self.monitor.optimizers for p in info.params}
        self._report("TD218", [p for p in unchanged if id(p) not in owners], _NO_OPTIMIZER)
        vanishing = {str(f.evidence.get("optimizer")) for f in report.by_code("TD215")}
        stuck = [p for p in unchanged
                 if id(p) in owners and owners[id(p)].label not in vanishing]
        zero_lr = [p for p in stuck if self._lr.get(id(p)) == 0.0]
        self._report("TD218", zero_lr, _ZERO_LR)
        moving = [p for p in stuck if self._lr.get(id(p)) != 0.0]
        self._report("TD218", [p for p in moving if not self._grad_norm.get(id(p))],
                     _ZERO_GRADIENT, Severity.INFO)
        self._report("TD218", [p for p in moving if self._grad_norm.get(id(p))], _TINY_UPDATE)

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

    def _report(self, code: str, params: list[Any], story: tuple[str, str],
                severity: Severity | None = None) -> None:
        """One finding per model, naming the modules (or parameters) concerned."""
        by_model: dict[int, list[Any]] = {}
        for param in params:
            by_model.setdefault(id(self._model[id(param)]), []).append(param)
        for group in by_model.values():
            model = self._model[id(group[0])]
            groups = group_by_module(model.inner, group)
            text, names = describe_params(self.monitor, group)
            location = assignment_location(self.monitor, model, groups[0][0],
                                           prefer_script=story is _NO_OPTIMIZER)
            location = location or Location(object=names[0])
            largest = max((self._grad_norm.get(id(p), 0.0) for p in group), default=0.0)
            lrs = sorted({self._lr[id(p)] for p in group if id(p) in self._lr})
            message, fix = story
            self.emit(finding(
                code, message.format(what=text, steps=self._steps, grad=largest,
                                     lr=", ".join(f"{lr:g}" for lr in lrs) or "?"),
                location, Depth.RUN, fix_hint=fix, severity=severity,
                evidence={"parameters": [n for _, ns in groups for n in ns],
                          "steps": self._steps, "max_grad_norm": largest},
            ))


_NO_GRADIENT = (
    "{what} require grad but never received a gradient in {steps} steps: not used on the "
    "way to the loss, or their output is detached",
    "Use them in the forward pass that produces the loss, or freeze them with "
    "`requires_grad_(False)` if they are unused on purpose.")
_NO_OPTIMIZER = (
    "{what} received gradients but never changed in {steps} steps: they are in no "
    "optimizer (was the optimizer built before this layer was created or replaced?)",
    "Create the optimizer after the model is final, or add these parameters with "
    "`optimizer.add_param_group({{'params': ...}})`.")
_ZERO_LR = (
    "{what} kept their initial values over {steps} steps although their optimizer holds "
    "them: the learning rate of their parameter group is 0",
    "Give their parameter group a non-zero learning rate (a 0 often comes from "
    "`int()` of a small rate, or a scheduler that ends at 0).")
_ZERO_GRADIENT = (
    "{what} kept their initial values over {steps} steps: their gradient was exactly zero "
    "at every sampled step (lr {lr}), so they cannot influence the loss (for example a "
    "bias cancelled by a difference of two outputs, or by a following normalisation)",
    "Remove them (`bias=False`) if that is by design, or find what cuts them off from "
    "the loss.")
_TINY_UPDATE = (
    "{what} kept their initial values over {steps} steps: the updates (lr {lr}, gradient "
    "norms up to {grad:.2g}) are below float32 resolution",
    "Raise the learning rate if it is a typo, or find why the gradients are this small "
    "(saturated activations, a loss scaled down by mistake).")


def _torch() -> Any:
    import torch

    return torch
