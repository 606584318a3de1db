"""``kl_div``'s domain at run time: log-probabilities in, probabilities (or, with
``log_target=True``, log-probabilities) as the target.

``F.kl_div(input, target)`` computes ``target * (log(target) - input)``: ``input`` must be
log-probabilities, which are never above 0. Given probabilities (a softmax where a
log_softmax belongs, the most common mistake in knowledge distillation) or raw scores, the
"divergence" can go negative and its gradient does not pull the two distributions
together (TD305). A target of log-probabilities without ``log_target=True`` (values below
0), or probabilities with it (values above 0), is outside the target's domain (TD309).

``kl_div`` leaves no node of its own in the autograd graph (it is composed of
``sub``/``mul``/``sum``), so the call is watched through ``torch.nn.functional.kl_div``,
which ``nn.KLDivLoss`` also calls. Cost: one Python call per ``kl_div``; the values are read
on the first 8 calls and one in 50 after, without a synchronisation (two reductions over
at most 4,096 values each).
"""

from __future__ import annotations

import functools
import importlib
import weakref
from typing import Any

from torchdoctor._kernel import raised_by_signal_handler
from torchdoctor.findings import Depth, Report
from torchdoctor.rules.detectors import detector
from torchdoctor.rules.registry import finding
from torchdoctor.runtime.detectors.base import CallSite, MonitorView, RuntimeDetector
from torchdoctor.runtime.detectors.loss_domain import (
    LOG_PROB_SLACK,
    PROBABILITY_SLACK,
    VALUES,
    floating_values,
)
from torchdoctor.runtime.detectors.loss_nodes import compiling
from torchdoctor.runtime.patches import Patches

__all__ = ["KlDivergenceDomain"]

FIRST_CALLS = 8
EVERY = 50


@detector("TD305", "TD309", depth=Depth.RUN)
class KlDivergenceDomain(RuntimeDetector):
    """Reads ``kl_div``'s input and target on a sample of calls."""

    def __init__(self) -> None:
        self._patches = Patches(alive=self.attached)
        self._calls = 0
        self._reported: set[tuple[str, CallSite]] = set()

    def on_attach(self, monitor: MonitorView) -> None:
        super().on_attach(monitor)
        module = importlib.import_module("torch.nn.functional")
        seen = weakref.WeakMethod(self._called)

        def make(original: Any) -> Any:
            @functools.wraps(original)
            def kl_div(input: Any, target: Any, *args: Any, **kwargs: Any) -> Any:
                live = self._patches.live() and not compiling()
                callback = seen() if live else None
                if callback is not None:
                    try:
                        callback(input, target, args, kwargs)
                    except Exception as error:  # noqa: BLE001 - never into the user's loss call
                        if raised_by_signal_handler(error):
                            raise
                        self._patches.remove()
                return original(input, target, *args, **kwargs)

            return kl_div

        self._patches.wrap(module, "kl_div", make)

    def _called(self, input: Any, target: Any, args: tuple[Any, ...], kwargs: Any) -> None:
        self._calls += 1
        if self._calls > FIRST_CALLS and self._calls % EVERY:
            return
        import torch

        if not (floating_values(input) and floating_values(target)):
            return
        site = self.monitor.user_site()
        if site is None:
            return
        # kl_div(input, target, size_average, reduce, reduction, log_target)
        log_target = bool(kwargs.get("log_target", args[3] if len(args) > 3 else False))
        with torch.no_grad():
            top = input.detach().reshape(-1)[:VALUES].max().float()
            rows = target.detach().reshape(-1)[:VALUES].float()
            vector = torch.stack([top, rows.min(), rows.max().to(top.device)])
        self.monitor.defer(vector, functools.partial(self._read, site, log_target))

    def _read(self, site: CallSite, log_target: bool, values: list[float]) -> None:
        top, low, high = values
        if top > LOG_PROB_SLACK:
            self._emit_input(site, top)
        outside = high > LOG_PROB_SLACK if log_target else low < -PROBABILITY_SLACK
        if outside:
            self._emit_target(site, log_target, low, high)

    def on_finish(self, report: Report) -> None:
        self._patches.remove()

    def _emit_input(self, site: CallSite, top: float) -> None:
        if ("TD305", site) in self._reported:
            return
        self._reported.add(("TD305", site))
        self.emit(
            finding(
                "TD305",
                f"`kl_div` at {site} receives inputs up to {top:.4g}: its input must be "
                "log-probabilities, which are never above 0, and it is given probabilities "
                "or raw scores (a `softmax` where `log_softmax` belongs), so the divergence "
                "can turn negative and its gradient does not match the two distributions",
                site.location(object="kl_div"),
                Depth.RUN,
                fix_hint="Pass `F.log_softmax(student_scores, dim=-1)` as the input; the "
                "target stays probabilities (`F.softmax(teacher_scores, dim=-1)`), or "
                "log-probabilities with `log_target=True`.",
                evidence={"max_input": top},
            )
        )

    def _emit_target(self, site: CallSite, log_target: bool, low: float, high: float) -> None:
        if ("TD309", site) in self._reported:
            return
        self._reported.add(("TD309", site))
        if log_target:
            problem = (
                "with `log_target=True` the target must be log-probabilities (never above "
                "0), and these are probabilities"
            )
            fix = "Drop `log_target=True` for a target of probabilities, or pass its log."
        else:
            problem = (
                "the target must be probabilities in [0, 1] unless `log_target=True`, and "
                "these are log-probabilities"
            )
            fix = "Pass `log_target=True` for a target of log-probabilities, or its `exp()`."
        self.emit(
            finding(
                "TD309",
                f"`kl_div` at {site} receives targets from {low:.4g} to {high:.4g}: "
                f"{problem}, so the divergence is not one and its minimum is not where the "
                "distributions agree",
                site.location(object="kl_div"),
                Depth.RUN,
                fix_hint=fix,
                evidence={"min_target": low, "max_target": high, "log_target": log_target},
            )
        )
