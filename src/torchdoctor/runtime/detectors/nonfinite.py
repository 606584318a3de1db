"""NaN and Inf in the loss (TD213), the gradients (TD212) and the parameters (TD214).

The loss is checked at every backward call (its value is read back anyway); gradients and
parameters at sampled steps, from the norms the monitor computes (a norm is non-finite
exactly when a value is). The first symptom switches on *localisation*: forward hooks on
every module of the known models, for a few steps, find the first module whose output is
non-finite although its inputs and its own parameters are finite, the module where NaN/Inf
is born. Nothing of this costs anything before the first symptom. When one bad step has
already made every parameter NaN, nothing can be localised after the fact; the finding
then says so, and ``localise_non_finite`` (``--localise-nan``) checks from the first step.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

from torchdoctor.findings import Depth, Location, Report
from torchdoctor.rules.detectors import detector
from torchdoctor.rules.registry import finding
from torchdoctor.runtime.detectors.base import (
    CallSite,
    LossValue,
    ModelInfo,
    MonitorView,
    RuntimeDetector,
    StepEvent,
    StepSample,
)
from torchdoctor.runtime.detectors.places import describe_params
from torchdoctor.runtime.hooks import global_forward_hook

__all__ = ["NonFinite"]

_LOCALISE_STEPS = 3
_site = attrgetter("site")
_value = attrgetter("value")
_FIX = (
    "Find where NaN/Inf starts: guard log/sqrt/division against zero (for example "
    "`torch.log(x.clamp_min(1e-8))`), lower the learning rate or clip gradients "
    "(`torch.nn.utils.clip_grad_norm_`), and check the inputs for NaN/Inf."
)


@dataclass(slots=True)
class _First:
    """The first sighting of a non-finite value, and how often it was seen since."""

    step: int
    value: float
    site: CallSite | None
    names: list[str] = field(default_factory=list)
    count: int = 1
    last_finite: int | None = None


@detector("TD212", "TD213", "TD214", depth=Depth.RUN)
class NonFinite(RuntimeDetector):
    """Reports the first NaN/Inf in the loss, gradients and parameters, and where it began."""

    sampled_hooks = frozenset({"on_step_begin"})

    def __init__(self) -> None:
        self._poisoned: str | None = None  # a module already holding non-finite parameters
        self._loss: dict[CallSite, _First] = {}
        self._losses_seen: Counter[CallSite] = Counter()
        self._grads: _First | None = None
        self._params: _First | None = None
        self._finite_sample: dict[str, int] = {}
        self._step_site: CallSite | None = None
        self._origin: tuple[str, int, bool] | None = None  # module path, step, bad params
        self._handles: list[Any] = []
        self._hooked: dict[int, Any] = {}  # modules checked while localising, by id
        self._localise_left = 0
        self._localised = False

    # -- symptoms ------------------------------------------------------------------------

    def on_attach(self, monitor: MonitorView) -> None:
        super().on_attach(monitor)
        self.unsubscribe("on_step_end")  # only counts down the localisation (_symptom)

    def on_model(self, model: ModelInfo) -> None:
        if self.monitor.options.localise_non_finite:
            self._symptom(always=True)

    def on_losses(self, losses: Sequence[LossValue]) -> None:
        self._losses_seen.update(map(_site, losses))
        if all(map(math.isfinite, map(_value, losses))):
            return  # the usual batch: counted from C
        for loss in losses:
            if math.isfinite(loss.value):
                continue
            first = self._loss.get(loss.site)
            if first is not None:
                first.count += 1
                continue
            self._loss[loss.site] = _First(loss.global_step + 1, loss.value, loss.site)
            self._symptom()

    def on_step_begin(self, event: StepEvent) -> None:
        if event.sampled and self._step_site is None:
            self._step_site = self.monitor.user_site()
            if self._step_site is not None:
                self.unsubscribe("on_step_begin")  # the one site it needs

    def on_sample(self, sample: StepSample) -> None:
        if all(map(math.isfinite, filter(None, sample.grad_norms))) and all(
            map(math.isfinite, sample.param_norms)
        ):  # the usual sample, checked from C: nothing bad, as the lists below would say
            self._grads = self._update(self._grads, "grads", [], sample.step)
            self._params = self._update(self._params, "params", [], sample.step)
            return
        params = sample.optimizer.params
        bad_grads = [
            params[i]
            for i, n in enumerate(sample.grad_norms)
            if n is not None and not math.isfinite(n)
        ]
        bad_params = [params[i] for i, n in enumerate(sample.param_norms) if not math.isfinite(n)]
        self._grads = self._update(self._grads, "grads", bad_grads, sample.step)
        self._params = self._update(self._params, "params", bad_params, sample.step)

    def _update(self, first: _First | None, kind: str, bad: list[Any], step: int) -> _First | None:
        if not bad:
            if first is None:
                self._finite_sample[kind] = step
            return first
        if first is not None:
            first.count += 1
            return first
        self._symptom()
        text, _ = describe_params(self.monitor, bad)
        return _First(step, math.nan, self._step_site, [text], 1, self._finite_sample.get(kind))

    # -- localisation --------------------------------------------------------------------

    def _symptom(self, always: bool = False) -> None:
        if self._localised and not always:
            return
        self._localised = True
        self._localise_left = 10**9 if always else _LOCALISE_STEPS
        for model in self.monitor.models:
            for module in model.inner.modules():
                if id(module) not in self._hooked:
                    self._hooked[id(module)] = module
        if not self._handles:  # one global hook, none on the model: it stays picklable
            handle = global_forward_hook(self._check)
            if handle is not None:
                self._handles.append(handle)
                self.resubscribe("on_step_end")

    def _check(self, module: Any, args: Any, output: Any) -> None:
        if self._origin is not None or self._localise_left <= 0 or not self._known(module):
            return
        if _all_finite(output) or not _all_finite(args):
            return
        path = self.monitor.module_path(module) or type(module).__name__
        if not all(_all_finite(p) for p in module.parameters()):
            self._poisoned = self._poisoned or path  # an effect of an earlier step
            return
        self._origin = (path, self.monitor.global_step + 1, False)

    def _known(self, module: Any) -> bool:
        return self._hooked.get(id(module)) is module

    def on_step_end(self, event: StepEvent) -> None:
        if self._handles and (self._origin is not None or self._localise_left <= 1):
            self._remove_hooks()
        elif self._handles:
            self._localise_left -= 1

    def _remove_hooks(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        self._hooked.clear()
        self._localise_left = 0
        self.unsubscribe("on_step_end")

    # -- findings ------------------------------------------------------------------------

    def on_finish(self, report: Report) -> None:
        self._remove_hooks()
        for site, first in self._loss.items():
            self._emit_loss(site, first)
        if self._grads is not None:
            self._emit_sampled("TD212", "gradients", self._grads)
        if self._params is not None:
            self._emit_sampled("TD214", "parameters", self._params)

    def _origin_text(self) -> str:
        if self._origin is not None:
            path, step, _ = self._origin
            return (
                f"; it starts in `{path}`, the first module whose output turned "
                f"non-finite from finite inputs and parameters (at step {step})"
            )
        if self._poisoned is not None:
            return (
                f"; by the time modules were checked, parameters were already non-finite "
                f"(from `{self._poisoned}` on), so the origin cannot be found after the "
                "fact: rerun with `torchdoctor run --localise-nan` to check every module "
                "from the first step"
            )
        return (
            "; no module's output turned non-finite from finite inputs in the steps "
            "checked after it, so it comes from outside the model (the loss "
            "computation, the data) or was a one-off"
        )

    def _emit_loss(self, site: CallSite, first: _First) -> None:
        total = self._losses_seen.get(site, first.count)
        where = f"`backward()` at {site}" if site.user else f"the loss at {site}"
        self.emit(
            finding(
                "TD213",
                f"The loss of {where} was {first.value} at step {first.step}, and non-finite "
                f"in {first.count} of {total} backward passes{self._origin_text()}",
                site.location(object=self._origin[0] if self._origin else None),
                Depth.RUN,
                fix_hint=_FIX,
                evidence={
                    "first_step": first.step,
                    "non_finite": first.count,
                    "losses": total,
                    "origin": self._origin[0] if self._origin else None,
                },
            )
        )

    def _emit_sampled(self, code: str, what: str, first: _First) -> None:
        shown = first.names[0]
        since = (
            f" (they were finite at step {first.last_finite})"
            if first.last_finite is not None
            else ""
        )
        place = first.site.location() if first.site is not None else Location()
        location = Location(path=place.path, line=place.line, snippet=place.snippet)
        self.emit(
            finding(
                code,
                f"The {what} of {shown} turned NaN/Inf at step {first.step}{since}, and were "
                f"non-finite in {first.count} sampled steps in all{self._origin_text()}",
                location,
                Depth.RUN,
                fix_hint=_FIX,
                evidence={
                    "first_step": first.step,
                    "parameters": first.names[0],
                    "sampled_steps_non_finite": first.count,
                    "origin": self._origin[0] if self._origin else None,
                },
            )
        )


def _all_finite(value: Any) -> bool:
    import torch

    if isinstance(value, torch.Tensor):
        if not value.is_floating_point() and not value.is_complex():
            return True
        return bool(torch.isfinite(value).all())
    if isinstance(value, (tuple, list)):
        return all(_all_finite(v) for v in value)
    if isinstance(value, dict):
        return all(_all_finite(v) for v in value.values())
    return True
