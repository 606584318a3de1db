"""Gradient accumulation that averages per-micro-batch token means (TD622).

The invariant: ``k`` micro-batches accumulated into one step stand for one large batch,
so every token (every target that counts) must weigh the same in the step's gradient.
A cross-entropy or NLL loss with ``reduction="mean"`` divides each micro-batch by its own
number of counted targets; when that number varies inside the window (padding masked with
``ignore_index``, sequences of different lengths), a token of a short micro-batch weighs
``n_long / n_short`` times a token of a long one, whatever the loss is divided by
afterwards (``/ k`` does not fix it). The loss node holds the count it divided by
(``NllLossBackward0._saved_total_weight``), so the weights are read on the values at the
call, whichever helper, collator or trainer built the batch.

Policy for correct programs that look alike:

* a ``reduction="sum"`` loss normalised once for the window (``/ num_items_in_batch``)
  is what the fix looks like: not judged;
* counts that differ only because no target was masked (a short last batch of an epoch)
  are not judged: every window must have masked targets;
* losses with class weights (their counts are sums of weights) are not judged;
* a step with one backward pass, or counts within ``_SPREAD`` of each other in most
  windows, is not reported.

Cost: per backward pass during the first ``_WINDOWS`` steps of each call path, a walk of
at most 32 autograd nodes (:func:`.loss_nodes.loss_calls`) and, per step, one read-back of
the window's counts without a synchronisation (:meth:`MonitorView.defer`); then one set
lookup per pass.
"""

from __future__ import annotations

import functools
import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from torchdoctor.findings import Depth, Report
from torchdoctor.rules.detectors import detector
from torchdoctor.rules.registry import finding
from torchdoctor.runtime.detectors.accumulation import call_path, settled_sites, usual_count
from torchdoctor.runtime.detectors.base import BackwardEvent, CallSite, RuntimeDetector, StepEvent
from torchdoctor.runtime.detectors.loss_nodes import LossFamily, compiling, loss_calls

__all__ = ["TokenMeansAveraged"]

_WINDOWS = 32  # steps of each call path whose counts are read
_SPREAD = 1.25  # largest over smallest count of a window, at the median window


@dataclass(slots=True)
class _Path:
    """The counts one call path of ``backward()`` divided by, window after window."""

    site: CallSite
    pending: list[tuple[Any, int]] = field(default_factory=list)  # (count tensor, targets)
    valid: bool = True  # every pass of the current window was a plain mean NLL
    eligible: bool = True  # False once a pass is summed or class-weighted
    windows: Counter[int] = field(default_factory=Counter)
    spreads: list[float] = field(default_factory=list)
    unmasked: int = 0  # windows whose every target counted
    example: tuple[float, ...] = ()


def _read_enough(path: _Path) -> bool:
    return not path.eligible or sum(path.windows.values()) >= _WINDOWS


@detector("TD622", depth=Depth.RUN)
class TokenMeansAveraged(RuntimeDetector):
    """Flags accumulated token-mean losses whose counts differ inside a step."""

    def __init__(self) -> None:
        self._paths: dict[tuple[Any, ...], _Path] = {}
        self._in_step = False
        self._settled: set[int] = set()  # id() of backward sites whose every path is read
        self._open = False  # a path saw a pass since the last step began

    def on_backward(self, event: BackwardEvent) -> None:
        if self._in_step or event.retain_graph or id(event.site) in self._settled:
            return
        key = call_path(event)
        path = self._paths.get(key)
        if path is None:
            path = self._paths[key] = _Path(event.site)
        self._open = True
        if not path.eligible or sum(path.windows.values()) >= _WINDOWS or compiling():
            path.valid = False
            return
        calls = [c for c in loss_calls(event.loss) if c.family is LossFamily.NLL]
        count = calls[0].saved("total_weight") if len(calls) == 1 else None
        target = calls[0].saved("target") if len(calls) == 1 else None
        if count is None or target is None:
            path.valid = False
            return
        if getattr(calls[0].node, "_saved_reduction", None) != 1 or (
            calls[0].saved("weight") is not None
        ):
            path.eligible = False
            return
        path.pending.append((count.detach().reshape(()), int(target.numel())))

    def on_step_begin(self, event: StepEvent) -> None:
        self._in_step = True
        if not self._open:
            return  # every site settled: each path is already reset
        self._open = False
        closed = False
        for path in self._paths.values():
            if path.pending and path.valid:
                path.windows[len(path.pending)] += 1
                if len(path.pending) > 1:
                    self._read(path)
                closed = True
            path.pending, path.valid = [], True
        if closed:
            self._settled = settled_sites(self._paths.values(), _read_enough)

    def _read(self, path: _Path) -> None:
        import torch

        counts = torch.stack([c.float() for c, _ in path.pending])
        targets = sum(n for _, n in path.pending)
        self.monitor.defer(counts, functools.partial(self._judge, path, targets))

    @staticmethod
    def _judge(path: _Path, targets: int, counts: list[float]) -> None:
        if sum(counts) >= targets:
            path.unmasked += 1
            return
        if min(counts) > 0:
            path.spreads.append(max(counts) / min(counts))
            if not path.example or path.spreads[-1] > max(path.spreads[:-1], default=0):
                path.example = tuple(counts)

    def on_step_end(self, event: StepEvent) -> None:
        self._in_step = False

    def on_finish(self, report: Report) -> None:
        for path in self._paths.values():
            k = usual_count(path.windows)
            if k is None or not path.eligible or path.unmasked or not path.spreads:
                continue
            spread = statistics.median(path.spreads)
            if spread >= _SPREAD:
                self._emit(path, k, spread)

    def _emit(self, path: _Path, k: int, spread: float) -> None:
        shown = ", ".join(f"{c:g}" for c in path.example)
        self.emit(
            finding(
                "TD622",
                f"`backward()` at {path.site} accumulates {k} micro-batches per optimizer "
                f"step, each a mean over its own counted targets (a mean-reduced "
                f"cross-entropy with masked targets), and the counts differ inside a step "
                f"(one step divided by {shown}; {spread:.1f}x apart at the median step): a "
                f"target of the smallest micro-batch weighs {spread:.1f} times one of the "
                "largest, so the step is not the gradient of the large batch it stands for",
                path.site.location(object="nll_loss"),
                Depth.RUN,
                fix_hint='Sum the loss over the targets (`reduction="sum"`) and divide it '
                "by the number of counted targets in the whole accumulation window, "
                "computed before its first micro-batch.",
                evidence={
                    "accumulation": k,
                    "median_spread": round(spread, 3),
                    "example_counts": list(path.example),
                    "steps_seen": sum(path.windows.values()),
                },
            )
        )
