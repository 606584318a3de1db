"""Root causes of training that cannot change the model, or changes the wrong one: a
one-class loss (TD308), an optimizer holding copies of the model's parameters (TD620), and
a target/teacher network that backward() runs through (TD222).

A classification loss over a single class: ``cross_entropy`` (or ``nll_loss`` after
``log_softmax``) on logits whose class dimension has size 1. ``log_softmax`` of one value
is exactly 0, so the loss is exactly 0 (or a constant) and every gradient is exactly zero:
the model never changes. The graph is read before ``backward()`` on a few calls per
place, so the cost is a handful of attribute reads.

Findings of this module come first in a run's report (they are emitted during the run),
so detectors that see its symptoms (zero gradients, parameters that never change, a
constant loss) leave the explanation to it.
"""

from __future__ import annotations

from typing import Any

from torchdoctor.findings import Depth, Location
from torchdoctor.rules.detectors import detector
from torchdoctor.rules.registry import finding
from torchdoctor.runtime.detectors.base import BackwardEvent, CallSite, RuntimeDetector

__all__ = [
    "SingleLogitCrossEntropy",
    "StaleOptimizerParameters",
    "TargetNetworkGetsGradients",
    "single_logit_shape",
    "stale_match",
]

_CHECKS_PER_SITE = 4
_GRAPH_NODES = 8  # autograd nodes read from the loss down


def single_logit_shape(loss: Any) -> tuple[int, ...] | None:
    """The shape of the scores when ``loss`` is a log-softmax over a dimension of size 1
    fed to NLL (what ``cross_entropy`` computes), else ``None``. Needs the graph before
    ``backward()`` frees its saved tensors."""
    frontier = [getattr(loss, "grad_fn", None)]
    seen = 0
    while frontier and seen < _GRAPH_NODES:
        node = frontier.pop(0)
        if node is None:
            continue
        seen += 1
        if node.name() == "LogSoftmaxBackward0":
            try:
                result, dim = node._saved_result, int(node._saved_dim)
            except (AttributeError, RuntimeError):  # freed, or another torch's layout
                return None
            if dim >= 2**63:  # a negative dim, saved as an unsigned 64-bit integer
                dim -= 2**64
            shape = tuple(result.shape)
            if not shape or not -len(shape) <= dim < len(shape):
                return None
            return shape if shape[dim] == 1 else None
        frontier.extend(next_node for next_node, _ in node.next_functions)
    return None


@detector("TD308", depth=Depth.RUN)
class SingleLogitCrossEntropy(RuntimeDetector):
    """Flags a cross-entropy loss computed over one class."""

    def __init__(self) -> None:
        self._checked: dict[CallSite, int] = {}

    def on_backward(self, event: BackwardEvent) -> None:
        checked = self._checked.get(event.site, 0)
        if checked >= _CHECKS_PER_SITE:
            return
        self._checked[event.site] = checked + 1
        shape = single_logit_shape(event.loss)
        if shape is None:
            return
        self._checked[event.site] = _CHECKS_PER_SITE  # found: no need to look again
        self.emit(
            finding(
                "TD308",
                f"The loss of `backward()` at {event.site} is a cross-entropy over a single "
                f"class: the scores have shape {list(shape)}, one logit per example. "
                "`log_softmax` of one value is exactly 0, so the loss is constant and every "
                "gradient is exactly zero: the model never learns",
                event.site.location(object="loss"),
                Depth.RUN,
                fix_hint="For a yes/no target, use `BCEWithLogitsLoss` on the single logit "
                "(`target.float()`); for C classes give the last layer C outputs.",
                evidence={"scores_shape": list(shape), "backward_call": event.index},
            )
        )


def stale_match(missing: list[Any], foreign: list[Any]) -> bool:
    """Whether every parameter in ``missing`` (the model's, in no optimizer) has a tensor of
    the same shape and dtype among ``foreign`` (an optimizer's, of no model): the optimizer
    holds copies of them."""
    from collections import Counter

    def key(tensor: Any) -> tuple[tuple[int, ...], Any]:
        return tuple(tensor.shape), tensor.dtype

    wanted, held = Counter(key(p) for p in missing), Counter(key(p) for p in foreign)
    return bool(missing) and all(held[k] >= n for k, n in wanted.items())


@detector("TD620", depth=Depth.RUN)
class StaleOptimizerParameters(RuntimeDetector):
    """Flags an optimizer that steps copies of a model's parameters (a deepcopy, or the
    layers a module had before it was rebuilt), while the model's own never change."""

    def on_finish(self, report: Any) -> None:
        held = {id(p) for info in self.monitor.optimizers for p in info.params}
        for info in self.monitor.optimizers:
            foreign = [p for p in info.params if self.monitor.model_of(p) is None]
            if not foreign:
                continue
            for model in self.monitor.models:
                missing = [
                    p for p in model.inner.parameters() if p.requires_grad and id(p) not in held
                ]
                if stale_match(missing, foreign):
                    self._emit(info, model, missing, foreign)

    def _emit(self, info: Any, model: Any, missing: list[Any], foreign: list[Any]) -> None:
        site = self.monitor.optimizer_site(info.optimizer)
        names = [self.monitor.param_name(p) or "?" for p in missing]
        shown = ", ".join(f"`{n}`" for n in names[:4]) + (" ..." if len(names) > 4 else "")
        where = f" (built at {site})" if site is not None else ""
        whole = len(missing) == sum(1 for p in model.inner.parameters() if p.requires_grad)
        what = (
            f"every trainable parameter of `{model.label}`"
            if whole
            else f"{len(missing)} parameter(s) of `{model.label}`: {shown}"
        )
        self.emit(
            finding(
                "TD620",
                f"{info.label}{where} steps {len(foreign)} tensor(s) that belong to no model "
                f"but have the shapes of {what}, which no optimizer holds: it was built for a "
                "copy of the model (a `deepcopy`, or layers replaced after it was made), so "
                "its steps never change the model that runs",
                site.location(object=model.label)
                if site is not None
                else self.monitor.user_location(object=model.label),
                Depth.RUN,
                fix_hint="Build the optimizer from the model that is trained, after the model "
                "is complete (after any deepcopy, `.to()` rebuild or layer replacement).",
                evidence={
                    "optimizer": info.label,
                    "model": model.label,
                    "stale_tensors": len(foreign),
                    "model_parameters": names[:20],
                },
            )
        )


def _shapes(module: Any) -> list[tuple[int, ...]]:
    return [tuple(p.shape) for p in module.parameters()]


@detector("TD222", depth=Depth.RUN)
class TargetNetworkGetsGradients(RuntimeDetector):
    """Flags a target, teacher or EMA network that backward() fills with gradients: a
    watched model that no optimizer holds, whose parameters have gradients, and that is
    a copy of a model an optimizer trains (or is kept in eval mode, as a teacher is)."""

    def on_finish(self, report: Any) -> None:
        held = {id(p) for info in self.monitor.optimizers for p in info.params}
        trained = [
            m for m in self.monitor.models if any(id(p) in held for p in m.inner.parameters())
        ]
        for model in self.monitor.models:
            params = list(model.inner.parameters())
            if not params or any(id(p) in held for p in params):
                continue
            with_grad = [p for p in params if p.grad is not None]
            if not with_grad:
                continue
            twin = next((t for t in trained if _shapes(t.inner) == _shapes(model.inner)), None)
            if twin is None and model.inner.training:
                continue  # no sign that it is a target or a teacher: TD601's business
            self._emit(model, twin, len(with_grad), len(params))

    def _emit(self, model: Any, twin: Any, with_grad: int, total: int) -> None:
        name = model.label or model.class_name
        role = (
            f"a copy of `{twin.label or twin.class_name}`, which an optimizer trains"
            if twin is not None
            else "kept in eval mode like a teacher"
        )
        self.emit(
            finding(
                "TD222",
                f"`{name}` ({role}) is in no optimizer, yet backward() filled the gradients of "
                f"{with_grad} of its {total} parameters: its output reached the loss with its "
                "graph, so every step also differentiates through it (time and memory), and "
                "the target is not the fixed value it is meant to be",
                Location(object=name),
                Depth.RUN,
                fix_hint="Compute the target/teacher output under `torch.no_grad()` (or "
                "`.detach()` it), and freeze the network with `requires_grad_(False)`.",
                evidence={
                    "model": name,
                    "parameters_with_grad": with_grad,
                    "copy_of": (twin.label or twin.class_name) if twin is not None else None,
                },
            )
        )
