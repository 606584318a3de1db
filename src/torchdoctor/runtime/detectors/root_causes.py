"""Root causes of training that cannot change the model, or changes the wrong one: a
one-class loss (TD308), a loss cut off from the model (TD209: a leaf rebuilt from numbers,
a detached output, a forward under ``no_grad``, a loss on labels only), an optimizer
holding copies of the model's parameters (TD620), and a target/teacher network that
backward() runs through (TD222).

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

from dataclasses import dataclass, field
from typing import Any, ClassVar

from torchdoctor.findings import Depth, Location
from torchdoctor.rules.detectors import detector
from torchdoctor.rules.registry import finding
from torchdoctor.runtime.detectors.base import (
    BackwardEvent,
    CallSite,
    ForwardEvent,
    RuntimeDetector,
)
from torchdoctor.runtime.sharding import flat_parameters

__all__ = [
    "LossCutFromModel",
    "SingleLogitCrossEntropy",
    "StaleOptimizerParameters",
    "TargetNetworkGetsGradients",
    "graph_leaves",
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


_WALK_NODES = 2000  # autograd nodes read before a walk gives up (no verdict)
_CUT_MIN = 2  # backward calls at one place, every one cut off, before it is reported


def graph_leaves(loss: Any, wanted: set[int]) -> list[Any] | None:
    """The leaf tensors that ``loss``'s graph reaches, when none of them is in ``wanted``
    (ids of the tensors meant to train); ``None`` as soon as one is (the usual case, found
    within a few nodes), or when the graph is larger than the walk's budget."""
    start = getattr(loss, "grad_fn", None)
    if start is None:
        return None
    frontier, seen, leaves = [start], {id(start)}, []
    while frontier:
        if len(seen) > _WALK_NODES:
            return None
        node = frontier.pop()
        variable = getattr(node, "variable", None)  # AccumulateGrad: a leaf that learns
        if variable is not None:
            if id(variable) in wanted:
                return None
            leaves.append(variable)
            continue
        for next_node, _ in getattr(node, "next_functions", ()):
            if next_node is not None and id(next_node) not in seen:
                seen.add(id(next_node))
                frontier.append(next_node)
    return leaves


@dataclass
class _Cut:
    """What the checked backward calls of one place showed."""

    checked: int = 0
    leaf: int = 0  # the loss itself was a leaf with requires_grad=True
    detached: int = 0  # its graph reached no trainable parameter
    leaf_shapes: list[list[int]] = field(default_factory=list)
    no_grad_forward: str | None = None
    first_call: int = 0


@detector("TD209", depth=Depth.RUN)
class LossCutFromModel(RuntimeDetector):
    """Flags a loss whose backward() cannot reach the model: a leaf tensor rebuilt from
    numbers (``torch.tensor(loss.item(), requires_grad=True)``), or a graph that reaches no
    trainable parameter (a detached output, a forward under ``no_grad``, labels only)."""

    wants_forward: ClassVar[bool | str] = "no_grad"

    def __init__(self) -> None:
        self._cuts: dict[CallSite, _Cut] = {}
        self._no_grad: dict[str, int] = {}  # model label -> global step of its last such call

    def on_forward(self, event: ForwardEvent) -> None:
        self._no_grad[event.model.label or event.model.class_name] = event.global_step

    def on_backward(self, event: BackwardEvent) -> None:
        cut = self._cuts.get(event.site)
        if cut is None:
            cut = self._cuts[event.site] = _Cut()
        elif cut.checked >= _CHECKS_PER_SITE:
            return
        wanted = self._trainable()
        if not wanted:
            return  # nothing that trains is known: no verdict
        cut.checked += 1
        loss = event.loss
        if loss.grad_fn is None:
            if loss.requires_grad and id(loss) not in wanted:
                cut.leaf += 1
                cut.first_call = cut.first_call or event.index + 1
                cut.leaf_shapes = [list(loss.shape)]
        else:
            leaves = graph_leaves(loss, wanted)
            if leaves is not None:
                cut.detached += 1
                cut.first_call = cut.first_call or event.index + 1
                cut.leaf_shapes = [list(t.shape) for t in leaves[:4]]
        frozen = [m for m, step in self._no_grad.items() if step == event.global_step]
        if frozen and (cut.leaf or cut.detached):
            cut.no_grad_forward = frozen[0]

    def _trainable(self) -> set[int]:
        """Ids of the parameters an optimizer holds that require grad, and of every
        trainable parameter of a watched model."""
        wanted = {id(p) for info in self.monitor.optimizers for p in info.params if p.requires_grad}
        for model in self.monitor.models:
            wanted.update(id(p) for p in model.inner.parameters() if p.requires_grad)
            # FSDP1's graph ends at its flat parameters, which parameters() may not list
            wanted.update(id(p) for p in flat_parameters(model.inner) if p.requires_grad)
        return wanted

    def on_finish(self, report: Any) -> None:
        if self.monitor.global_step < 1:
            return
        for site, cut in self._cuts.items():
            bad = cut.leaf + cut.detached
            if bad >= _CUT_MIN and bad == cut.checked:
                self._emit(site, cut)

    def _emit(self, site: CallSite, cut: _Cut) -> None:
        models = [m.label or m.class_name for m in self.monitor.models]
        model = f"`{models[0]}`" if len(models) == 1 else "the model"
        if cut.leaf >= cut.detached:
            what = (
                "a leaf tensor with `requires_grad=True` and no `grad_fn`: it was rebuilt "
                "from numbers (`torch.tensor(loss.item(), requires_grad=True)`, or "
                "`requires_grad_()` on a detached result), so backward() fills only its own "
                "`.grad`"
            )
            fix = (
                "Call `backward()` on the loss tensor the criterion returned; keep `.item()` "
                "for logging only, and never re-wrap a loss with `torch.tensor(...)`."
            )
        else:
            leaves = ", ".join(str(s) for s in cut.leaf_shapes) or "none"
            what = (
                "computed from tensors that reach no trainable parameter (its graph ends at "
                f"leaf tensors of shapes {leaves}, none of them a parameter): the model's "
                "output was cut from the graph (`.detach()`, `.item()`/`.numpy()` re-wrapped "
                "with `torch.tensor`, a forward under `torch.no_grad()`), or the loss is "
                "computed from the labels only"
            )
            fix = (
                "Compute the loss from the model's output itself, with grad mode on, and "
                "compare it with the target (not the target with itself)."
            )
        if cut.no_grad_forward is not None:
            what += (
                f"; `{cut.no_grad_forward}` was called under `torch.no_grad()` in the same "
                "step (measured)"
            )
        self.emit(
            finding(
                "TD209",
                f"The loss of `backward()` at {site} is {what}. No parameter of {model} "
                f"gets a gradient from it ({cut.leaf + cut.detached} of {cut.checked} "
                "checked calls): the loss can only stay where it is, and the model never "
                "learns",
                site.location(object="loss"),
                Depth.RUN,
                fix_hint=fix,
                evidence={
                    "cause": "leaf-loss" if cut.leaf >= cut.detached else "no-parameter-reached",
                    "checked_backward_calls": cut.checked,
                    "cut_backward_calls": cut.leaf + cut.detached,
                    "first_backward_call": cut.first_call,
                    "leaf_shapes": cut.leaf_shapes,
                    "no_grad_forward": cut.no_grad_forward,
                },
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


_FINGERPRINT_VALUES = 16  # first values of each parameter compared at the end


def _fingerprint(module: Any) -> Any:
    """The first values of each floating parameter, copied (``None`` without any)."""
    import torch

    params = [
        p
        for p in module.parameters()
        if p.numel() and p.is_floating_point() and p.device.type != "meta"
    ]
    if not params:
        return None
    with torch.no_grad():
        local = [p.to_local() if hasattr(p, "to_local") else p.detach() for p in params[:64]]
        return torch.cat([t.reshape(-1)[:_FINGERPRINT_VALUES].float().cpu() for t in local])


def _shapes(module: Any) -> list[tuple[int, ...]]:
    return [tuple(p.shape) for p in module.parameters()]


@detector("TD222", depth=Depth.RUN)
class TargetNetworkGetsGradients(RuntimeDetector):
    """Flags a target, teacher or EMA network that backward() fills with gradients: a
    watched model that no optimizer holds, whose parameters have gradients, and that is
    a copy of a model an optimizer trains (or is kept in eval mode, as a teacher is, and
    never changes: a model trained by hand-written updates, ``p.data.add_(p.grad, ...)``,
    is evaluated in eval mode too, but its values move)."""

    def __init__(self) -> None:
        self._first_values: dict[int, Any] = {}  # id(model) -> a few of its first values

    def on_model(self, model: Any) -> None:
        self._first_values[id(model.inner)] = _fingerprint(model.inner)

    def _changed(self, model: Any) -> bool:
        """Whether the model's values moved since it was first seen (trained by hand)."""
        before = self._first_values.get(id(model.inner))
        now = _fingerprint(model.inner)
        return before is not None and now is not None and not bool((before == now).all())

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
            if twin is None and (model.inner.training or self._changed(model)):
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
