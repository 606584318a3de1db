"""Parameters that never get a gradient (TD208), are in no optimizer (TD601) or never
change (TD218).

Only models that train (at least one parameter gets a gradient) are judged, and only
parameters that require grad: a backbone frozen on purpose (``requires_grad=False``) and a
teacher or EMA model without gradients are left alone. "Received a gradient" is checked at
every step on the shrinking set of parameters not seen with one yet, so a branch used once
in a while is not missed. "Never changed" compares each parameter's float64 norm at the end with
the one at discovery (its version counter only where no norm is taken: fused optimizer
kernels update in place without bumping it). A parameter that never changed and is held by no
optimizer the monitor saw is the run-time view of TD601 (the problem ``check`` finds before
training); one that an optimizer holds is TD218, with the reason it did not move.

Why a parameter in an optimizer never changed is judged against the other parameters of
that optimizer, not absolutely: a gradient whose size per element is rounding noise next
to theirs (the bias of a layer followed by BatchNorm, which subtracts each channel's batch
mean and so cancels any bias) is a structural zero, reported at info; a gradient of normal
size that still moves nothing means the learning rate is too small (a warning).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from torchdoctor.findings import Depth, Location, Report, Severity
from torchdoctor.rules.detectors import detector
from torchdoctor.rules.registry import finding
from torchdoctor.runtime.detectors.base import (
    CallSite,
    ModelInfo,
    OptimizerInfo,
    RuntimeDetector,
    StepEvent,
    StepSample,
)
from torchdoctor.runtime.detectors.explains import Scope, explained, explained_names
from torchdoctor.runtime.detectors.places import (
    assignment_location,
    describe_params,
    display_path,
    group_by_module,
    script_assignment_location,
)
from torchdoctor.runtime.detectors.tree import parameters_in, submodules, submodules_at
from torchdoctor.runtime.sharding import sharded_by_fsdp1
from torchdoctor.runtime.stats import exact_norms

__all__ = ["ParameterCoverage"]

_MIN_STEPS = 3
# A gradient this small per element, next to the median of the optimizer's other
# parameters, is float32 rounding noise around an exact zero.
_NOISE_RATIO = 1e-4


@detector("TD208", "TD218", "TD601", depth=Depth.RUN)
class ParameterCoverage(RuntimeDetector):
    """Names trainable parameters that get no gradient, sit in no optimizer, or never move."""

    def __init__(self) -> None:
        self._unseen: dict[int, Any] = {}  # requires grad, no gradient seen yet
        self._seen: dict[int, Any] = {}  # got a gradient at least once
        self._model: dict[int, ModelInfo] = {}
        self._version: dict[int, int] = {}
        self._initial_norm: dict[int, float] = {}
        self._grad_norm: dict[int, float] = {}
        self._lr: dict[int, float] = {}
        self._steps = 0
        self._since: dict[int, int] = {}  # parameters that appeared mid-run: from which step
        self._layout: dict[int, tuple[int, ...]] = {}  # model -> ids of its parameters

    def on_model(self, model: ModelInfo) -> None:
        self._layout[id(model)] = _layout(model.inner)
        self._track(model, [p for p in model.inner.parameters() if p.requires_grad])

    def _track(self, model: ModelInfo, params: list[Any]) -> None:
        if sharded_by_fsdp1(model.inner):
            return  # a parameter outside this rank's shard gets no .grad here, by design
        params = [p for p in params if id(p) not in self._model]
        for param in params:
            key = id(param)
            self._model[key] = model
            self._unseen[key] = param
            self._version[key] = param._version
        dense = [p for p in params if not p.is_sparse and p.is_floating_point()]
        if dense:
            torch = _torch()
            with torch.no_grad():
                vector = exact_norms(torch, [p.detach() for p in dense])
            keys = [id(p) for p in dense]
            self.monitor.defer(
                vector, lambda values: self._initial_norm.update(zip(keys, values, strict=True))
            )

    def on_step_begin(self, event: StepEvent) -> None:
        self._steps = max(self._steps, event.global_step)
        if event.sampled:
            self._replaced_layers(event)
        if not self._unseen:
            return
        for key, param in list(self._unseen.items()):
            if param.grad is not None:
                del self._unseen[key]
                self._seen[key] = param

    def _replaced_layers(self, event: StepEvent) -> None:
        """Parameters that appeared in a model since it was discovered (a layer replaced or
        added mid-run, by pruning or a new head) are watched from now on."""
        for model in self.monitor.models:
            layout = _layout(model.inner, event)
            if self._layout.get(id(model)) == layout:
                continue
            self._layout[id(model)] = layout
            new = [
                p for p in model.inner.parameters() if p.requires_grad and id(p) not in self._model
            ]
            self._since.update((id(p), event.global_step) for p in new)
            self._track(model, new)

    def on_sample(self, sample: StepSample) -> None:
        for param, norm, group in zip(
            sample.optimizer.params, sample.grad_norms, sample.group_of, strict=True
        ):
            if norm is not None:
                key = id(param)
                self._grad_norm[key] = max(self._grad_norm.get(key, 0.0), norm)
                self._lr[key] = sample.lrs[group]

    def on_finish(self, report: Report) -> None:
        if self._steps < _MIN_STEPS:
            return
        trained = {id(self._model[key]) for key in self._seen}
        never = [
            p for k, p in self._unseen.items() if id(self._model[k]) in trained and p.requires_grad
        ]
        self._report("TD208", never, _NO_GRADIENT)
        unchanged = self._unchanged()
        owners = {id(p): info for info in self.monitor.optimizers for p in info.params}
        targets = explained_names(report, "TD601", Scope.MODEL)  # target networks: TD222
        if not explained(report, "TD601"):  # else the optimizer holds their copies: TD620
            self._report(
                "TD601",
                [
                    p
                    for p in unchanged
                    if id(p) not in owners and _name_of(self._model.get(id(p))) not in targets
                ],
                _NO_OPTIMIZER,
            )
        vanishing = explained_names(report, "TD218", Scope.OPTIMIZER)
        if explained(report, "TD218"):  # a one-class loss, a loss cut from the model
            return  # TD308 / TD209 name why nothing changes
        stuck = [p for p in unchanged if id(p) in owners and owners[id(p)].label not in vanishing]
        zero_lr = [p for p in stuck if self._lr.get(id(p)) == 0.0]
        self._report("TD218", zero_lr, _ZERO_LR)
        moving = [p for p in stuck if self._lr.get(id(p)) != 0.0]
        self._report(
            "TD218",
            [p for p in moving if not self._grad_norm.get(id(p))],
            _ZERO_GRADIENT,
            Severity.INFO,
        )
        small = [p for p in moving if self._grad_norm.get(id(p))]
        noise = [p for p in small if self._is_noise(p, owners[id(p)].params)]
        noisy = {id(p) for p in noise}
        cancelled = {
            id(p): norm
            for p in noise
            if (norm := _normalisation_after(self._model[id(p)].inner, p))
        }
        self._report(
            "TD218",
            [p for p in noise if id(p) in cancelled],
            _CANCELLED,
            Severity.INFO,
            normalisations=cancelled,
        )
        self._report("TD218", [p for p in noise if id(p) not in cancelled], _NOISE, Severity.INFO)
        self._report("TD218", [p for p in small if id(p) not in noisy], _TINY_UPDATE)

    def _is_noise(self, param: Any, neighbours: tuple[Any, ...]) -> bool:
        """Whether ``param``'s gradient per element is noise next to its optimizer's others."""
        others = [
            _per_element(self._grad_norm[id(p)], p)
            for p in neighbours
            if p is not param and self._grad_norm.get(id(p))
        ]
        if not others:
            return False
        reference = sorted(others)[len(others) // 2]
        return _per_element(self._grad_norm[id(param)], param) < _NOISE_RATIO * reference

    def _unchanged(self) -> list[Any]:
        candidates = [
            p
            for p in self._seen.values()
            if p.requires_grad and self._steps - self._since.get(id(p), 0) >= _MIN_STEPS
        ]
        if not candidates:
            return []
        torch = _torch()
        dense = [p for p in candidates if not p.is_sparse and id(p) in self._initial_norm]
        with torch.no_grad():
            now = exact_norms(torch, [p.detach() for p in dense]).tolist() if dense else []
        current = {id(p): value for p, value in zip(dense, now, strict=True)}
        return [p for p in candidates if self._same(p, current.get(id(p)))]

    def _same(self, param: Any, norm: float | None) -> bool:
        """Whether ``param`` still holds its initial values. The norm decides wherever it
        was measured: fused optimizer kernels (``AdamW(fused=True)``) and writes through
        ``.data`` change the values without bumping the version counter, so an unchanged
        counter alone is no evidence. It decides only where no norm exists (sparse)."""
        initial = self._initial_norm.get(id(param))
        if norm is not None and initial is not None:
            return norm == initial
        return bool(param._version == self._version[id(param)])

    def _report(
        self,
        code: str,
        params: list[Any],
        story: tuple[str, str],
        severity: Severity | None = None,
        normalisations: dict[int, str] | None = None,
    ) -> None:
        """One finding per model, naming the modules (or parameters) concerned."""
        by_model: dict[int, list[Any]] = {}
        for param in params:
            by_model.setdefault(id(self._model[id(param)]), []).append(param)
        for group in by_model.values():
            model = self._model[id(group[0])]
            groups = group_by_module(model.inner, group)
            text, names = describe_params(self.monitor, group)
            location = self._place(story, model, groups[0][0], group) or Location(object=names[0])
            measured = [self._grad_norm[id(p)] for p in group if id(p) in self._grad_norm]
            largest = max(measured, default=0.0)
            lrs = sorted({self._lr[id(p)] for p in group if id(p) in self._lr})
            norm_paths = list(
                dict.fromkeys(
                    display_path(self.monitor, model, normalisations[id(p)])
                    for p in group
                    if normalisations and id(p) in normalisations
                )
            )
            message, fix = story
            evidence: dict[str, Any] = {
                "parameters": [n for _, ns in groups for n in ns],
                "steps": self._steps,
            }
            if measured:  # params in no optimizer are never sampled: no norm to show
                evidence["max_grad_norm"] = largest
            if norm_paths:
                evidence["normalisations"] = norm_paths
            self.emit(
                finding(
                    code,
                    message.format(
                        what=text,
                        steps=self._steps,
                        grad=largest,
                        lr=", ".join(f"{lr:g}" for lr in lrs) or "?",
                        norms=", ".join(f"`{n}`" for n in norm_paths),
                    ),
                    location,
                    Depth.RUN,
                    fix_hint=fix,
                    severity=severity,
                    evidence=evidence,
                )
            )

    def _place(
        self, story: tuple[str, str], model: ModelInfo, path: str, params: list[Any]
    ) -> Location | None:
        """Where the fix goes. A layer replaced in the script after the optimizer was built
        (``model.head = ...``) is placed there; parameters in no optimizer, or in a group
        whose learning rate is 0, at the line that built the optimizer; otherwise where
        the module is assigned."""
        if story is _NO_OPTIMIZER:
            replaced = script_assignment_location(self.monitor, model, path)
            built = self._built(self.monitor.optimizers) if replaced is None else None
            return (
                replaced
                or _at(built, display_path(self.monitor, model, path))
                or assignment_location(self.monitor, model, path)
            )
        if story is _ZERO_LR:
            owners = [
                info
                for info in self.monitor.optimizers
                if any(p is q for p in params for q in info.params)
            ]
            at_optimizer = _at(self._built(owners), display_path(self.monitor, model, path))
            return at_optimizer or assignment_location(self.monitor, model, path)
        return assignment_location(self.monitor, model, path)

    def _built(self, optimizers: Sequence[OptimizerInfo]) -> CallSite | None:
        """The line that built the optimizer, when exactly one is concerned."""
        if len(optimizers) != 1:
            return None
        return self.monitor.optimizer_site(optimizers[0].optimizer)


def _at(site: CallSite | None, shown: str) -> Location | None:
    return site.location(object=shown) if site is not None else None


def _per_element(norm: float, param: Any) -> float:
    return float(norm) / math.sqrt(max(1, int(param.numel())))


def _normalisation_after(model: Any, param: Any) -> str | None:
    """Path of the BatchNorm/InstanceNorm registered right after the layer whose bias is
    ``param`` (with one feature per bias entry): a normalisation that cancels that bias."""
    from torch.nn.modules.batchnorm import _NormBase

    for parent_path, parent in model.named_modules():
        children = list(parent.named_children())
        for (_, layer), (name, following) in zip(children, children[1:], strict=False):
            if (
                layer._parameters.get("bias") is param
                and isinstance(following, _NormBase)
                and following.num_features == param.numel()
            ):
                return f"{parent_path}.{name}" if parent_path else name
    return None


_NO_GRADIENT = (
    "{what} require grad but never received a gradient in {steps} steps: not used on the "
    "way to the loss, or their output is detached",
    "Use them in the forward pass that produces the loss, or freeze them with "
    "`requires_grad_(False)` if they are unused on purpose.",
)
_NO_OPTIMIZER = (
    "{what} received gradients but never changed in {steps} steps: they are in no "
    "optimizer (it was built from part of the model, such as `model.head.parameters()`, "
    "from parameter groups chosen by name that miss them, or before this layer was "
    "created or replaced)",
    "Build the optimizer from `model.parameters()` after the model is final (groups chosen "
    "by name must cover every parameter), or add these parameters with "
    "`optimizer.add_param_group({'params': ...})`.",
)
_ZERO_LR = (
    "{what} kept their initial values over {steps} steps although their optimizer holds "
    "them: the learning rate of their parameter group is 0",
    "Give their parameter group a non-zero learning rate (a 0 often comes from floor "
    "division such as `lr // 10`, `int()` of a small rate, or a scheduler that ends at "
    "0); freeze parameters meant to stay fixed with `requires_grad_(False)` instead.",
)
_ZERO_GRADIENT = (
    "{what} kept their initial values over {steps} steps: their gradient was exactly zero "
    "at every sampled step (lr {lr}), so they cannot influence the loss (for example a "
    "bias cancelled by a difference of two outputs, or by a following normalisation)",
    "Remove them (`bias=False`) if that is by design, or find what cuts them off from the loss.",
)
_CANCELLED = (
    "{what} kept their initial values over {steps} steps: each is the bias of a layer "
    "followed by a normalisation ({norms}) that subtracts the batch mean of every channel, "
    "which cancels the bias, so its gradient is rounding noise (norms up to {grad:.2g}) "
    "and it cannot influence the loss; training is not affected",
    "Build those layers with `bias=False`; the normalisation's own shift does the bias's job.",
)
_NOISE = (
    "{what} kept their initial values over {steps} steps: their gradient is rounding noise "
    "(norms up to {grad:.2g}, less than 1e-4 of the other parameters' per element), so "
    "something cancels them, such as a following normalisation, and they cannot "
    "influence the loss",
    "Remove them (`bias=False`) if that is by design, or find what cancels them.",
)
_TINY_UPDATE = (
    "{what} kept their initial values over {steps} steps: the updates (lr {lr}, gradient "
    "norms up to {grad:.2g}) are below float32 resolution",
    "Raise the learning rate if it is a typo, or find why the gradients are this small "
    "(saturated activations, a loss scaled down by mistake).",
)


def _layout(module: Any, event: StepEvent | None = None) -> tuple[int, ...]:
    """Ids of the parameters under ``module``, in a fixed order: they change when a layer
    or a parameter is replaced, added or removed (read at every sampled step)."""
    try:
        modules = submodules(module) if event is None else submodules_at(event, module)
        return tuple(map(id, parameters_in(modules)))
    except (AttributeError, TypeError):  # not a plain nn.Module tree
        return tuple(id(p) for p in module.parameters())


def _torch() -> Any:
    import torch

    return torch


def _name_of(model: ModelInfo | None) -> str | None:
    """A model's name as TD222 reports it."""
    return None if model is None else (model.label or model.class_name)
