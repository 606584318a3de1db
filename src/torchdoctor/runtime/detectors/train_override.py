"""Freezing that only an overridden ``train()`` applies, and that never happened (TD507).

Backbones of detection and classification toolkits freeze their first stages (and put
their normalisation layers in eval mode) inside an overridden ``train(mode)``; a model is
built in training mode, so a script that never calls ``model.train()`` trains the stages
meant frozen. The invariant: a model trained in training mode is in the state its own
``train(True)`` gives it. At the first step of each optimizer, for each model holding a
module whose class (not torch's) overrides ``train``, the detector asks what ``train(True)``
would do on a *shadow* of the model: the same module objects copied shallowly, with every
parameter and buffer replaced by a tensor on the ``meta`` device (no memory, no data), and
the call made with the user's output silenced. Parameters the shadow freezes while the
real ones require grad, sit in the stepping optimizer and have changed by the end of the
run are the finding (BatchNorm layers the shadow puts in eval mode are named with them).
Only a ``train()`` whose source proves it sets nothing but modes and ``requires_grad``
flags is run this way (:func:`~torchdoctor.runtime.train_purity.train_is_pure`); any other
is never called, and the detector stays quiet on that model.

Policy for correct programs that look alike: a model unfrozen on purpose after
``train()`` (gradual unfreezing) was frozen at its first step, so the shadow and the model
agree there and nothing is judged; a ``train()`` that fails on the shadow, or a model the
shadow cannot be built for, is skipped; parameters that did not change are not reported.
"""

from __future__ import annotations

import contextlib
import copy
import io
import logging
import warnings
from typing import Any

from torchdoctor.findings import Depth, Location, Report
from torchdoctor.rules.detectors import detector
from torchdoctor.rules.registry import finding
from torchdoctor.runtime.detectors.base import (
    CallSite,
    OptimizerInfo,
    RuntimeDetector,
    StepEvent,
)
from torchdoctor.runtime.detectors.places import describe_params
from torchdoctor.runtime.train_purity import train_is_pure

__all__ = ["TrainOnlyFreezing"]

_SLICE = 4096  # values compared per parameter at the end


@detector("TD507", depth=Depth.RUN)
class TrainOnlyFreezing(RuntimeDetector):
    """Flags parameters that the model's own ``train()`` would freeze, left trainable."""

    def __init__(self) -> None:
        self._seen_models: set[int] = set()
        self._seen_optimizers: set[int] = set()
        self._suspects: list[tuple[CallSite | None, str, list[Any], Any, list[str]]] = []

    def on_optimizer(self, optimizer: OptimizerInfo) -> None:
        if id(optimizer.optimizer) not in self._seen_optimizers:
            self.resubscribe("on_step_begin")  # judged at its first step

    def on_step_begin(self, event: StepEvent) -> None:
        key = id(event.optimizer.optimizer)
        if key in self._seen_optimizers:
            return
        self._seen_optimizers.add(key)
        if all(id(o.optimizer) in self._seen_optimizers for o in self.monitor.optimizers):
            self.unsubscribe("on_step_begin")  # every known optimizer was judged
        stepped = {id(p) for p in event.optimizer.params}
        for model in self.monitor.models:
            if id(model) in self._seen_models or not model.inner.training:
                continue
            owner = _overriding_train(model.inner)
            if owner is None or not _pure_trains(model.inner):
                continue  # no override, or one that may touch more than modes and flags
            self._seen_models.add(id(model))
            shadow = _shadow_train(model.inner)
            if shadow is None:
                continue
            frozen, eval_norms = shadow
            params = [p for p in frozen if p.requires_grad and id(p) in stepped]
            if params:
                torch = _torch()
                with torch.no_grad():
                    start = [_slice(p).clone() for p in params]
                self._suspects.append((self.monitor.user_site(), owner, params, start, eval_norms))

    def on_finish(self, report: Report) -> None:
        torch = _torch()
        for site, owner, params, start, eval_norms in self._suspects:
            with torch.no_grad():
                changed = [
                    p
                    for p, s in zip(params, start, strict=True)
                    if p.requires_grad and not torch.equal(_slice(p), s)
                ]
            if not changed:
                continue
            text, names = describe_params(self.monitor, changed)
            norms = (
                f"; it would also put {len(eval_norms)} normalisation layer(s) in eval mode "
                f"(`{eval_norms[0]}`...), which keep updating their statistics instead"
                if eval_norms
                else ""
            )
            self.emit(
                finding(
                    "TD507",
                    f"{text} are frozen by `{owner}.train()` (it sets `requires_grad=False` "
                    f"on them){norms}, but the model trained without `train()` being "
                    "called: a model is built in training mode, so its own freezing never "
                    "ran, and the optimizer changed the parameters meant to keep their "
                    "pretrained values",
                    site.location(object=names[0]) if site else Location(object=names[0]),
                    Depth.RUN,
                    fix_hint="Call `model.train()` before the training loop (and after every "
                    "evaluation), so that the model's own `train()` applies its freezing.",
                    evidence={"parameters": names, "train_defined_by": owner},
                )
            )
        self._suspects.clear()


def _overriding_train(model: Any) -> str | None:
    """The name of the first class in ``model`` (not torch's) that overrides ``train``."""
    import torch

    base = torch.nn.Module.train
    for module in model.modules():
        cls = type(module)
        if cls.train is not base and not cls.__module__.startswith("torch."):
            return cls.__qualname__
    return None


def _pure_trains(model: Any) -> bool:
    """Every ``train`` override in ``model`` only sets modes and flags: the shadow may run
    them (see :mod:`torchdoctor.runtime.train_purity`)."""
    return all(train_is_pure(cls) for cls in {type(module) for module in model.modules()})


def _shadow_train(model: Any) -> tuple[list[Any], list[str]] | None:
    """Run ``train(True)`` on a meta-device shadow of ``model``; the real parameters it
    freezes, and the paths of the normalisation layers it leaves in eval mode."""
    import torch

    originals: dict[int, Any] = {}
    paths: dict[int, tuple[str, Any]] = {}

    def shadow_of(module: Any, path: str) -> Any:
        twin = copy.copy(module)
        paths[id(twin)] = (path, module)
        twin._parameters = {}
        for name, param in module._parameters.items():
            if param is None:
                twin._parameters[name] = None
                continue
            meta = torch.nn.Parameter(
                torch.empty(param.shape, dtype=param.dtype, device="meta"),
                requires_grad=param.requires_grad,
            )
            originals[id(meta)] = (param, meta)
            twin._parameters[name] = meta
        twin._buffers = {
            name: None if b is None else torch.empty(b.shape, dtype=b.dtype, device="meta")
            for name, b in module._buffers.items()
        }
        twin._modules = {
            name: None if child is None else shadow_of(child, f"{path}.{name}".lstrip("."))
            for name, child in module._modules.items()
        }
        return twin

    try:
        shadow = shadow_of(model, "")
        with _silenced():
            shadow.train(True)
    except Exception:  # noqa: BLE001 - a train() that needs real data: nothing to judge
        return None
    frozen = [param for param, meta in originals.values() if not meta.requires_grad]
    norm_base = torch.nn.modules.batchnorm._NormBase
    eval_norms = [
        paths[id(m)][0]
        for m in shadow.modules()
        if isinstance(m, norm_base) and not m.training and paths[id(m)][1].training
    ]
    return frozen, eval_norms


@contextlib.contextmanager
def _silenced() -> Any:
    """The user's ``train()`` runs on the shadow without printing, logging or warning."""
    previous = logging.root.manager.disable
    logging.disable(logging.CRITICAL)
    try:
        with (
            contextlib.redirect_stdout(io.StringIO()),
            contextlib.redirect_stderr(io.StringIO()),
            warnings.catch_warnings(),
        ):
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.disable(previous)


def _slice(param: Any) -> Any:
    return param.detach().reshape(-1)[:_SLICE]


def _torch() -> Any:
    import torch

    return torch
