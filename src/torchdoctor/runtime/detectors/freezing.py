"""A frozen part of the model that still changes (TD507).

Freezing with ``requires_grad_(False)`` stops gradients, not BatchNorm: a frozen backbone
left in training mode (``model.train()`` every epoch, or an overridden ``train()`` that
freezes flags but not modes) keeps updating its running statistics from every batch, so
the "frozen" features drift away from the ones the head was fitted on, and evaluation
uses statistics of the new data. On sampled steps the detector reads, for each frozen
part (every parameter ``requires_grad=False``, and never seen trainable), how many
batches its BatchNorm layers have counted (``num_batches_tracked``), read back without a
synchronisation; a count that keeps rising is the finding.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from torchdoctor.findings import Depth, Location, Report
from torchdoctor.rules.detectors import detector
from torchdoctor.rules.registry import finding
from torchdoctor.runtime.detectors.base import ModelInfo, RuntimeDetector, StepEvent
from torchdoctor.runtime.detectors.places import assignment_location, display_path
from torchdoctor.runtime.detectors.tree import parameters_in, submodules_at

__all__ = ["FrozenModuleUpdating", "frozen_parts"]

_MIN_RISES = 2  # sampled intervals in which a frozen part's statistics moved


def frozen_parts(model: Any) -> list[tuple[str, Any]]:
    """The largest submodules (not the root) whose parameters all have
    ``requires_grad=False`` and that hold BatchNorm layers tracking running statistics."""
    parts: list[tuple[str, Any]] = []
    for path, module in model.named_modules():
        if not path or any(path.startswith(p + ".") for p, _ in parts):
            continue
        params = list(module.parameters())
        if params and not any(p.requires_grad for p in params) and _norms(module):
            parts.append((path, module))
    return parts


def _parameters(model: Any, event: StepEvent) -> list[Any]:
    """The model's parameters for the sampled check of their flags (a shared one twice)."""
    try:
        return parameters_in(submodules_at(event, model))
    except (AttributeError, TypeError):  # not a plain nn.Module tree
        return list(model.parameters())


def _norms(module: Any) -> list[Any]:
    import torch

    return [
        m
        for m in module.modules()
        if isinstance(m, torch.nn.modules.batchnorm._NormBase)
        and m.track_running_stats
        and m.num_batches_tracked is not None
    ]


@dataclass(slots=True)
class _Part:
    counts: list[float] = field(default_factory=list)
    rises: int = 0
    first_step: int | None = None
    training: bool = False


@detector("TD507", depth=Depth.RUN)
class FrozenModuleUpdating(RuntimeDetector):
    """Flags a frozen submodule whose BatchNorm statistics keep changing."""

    sampled_hooks = frozenset({"on_step_end"})

    def __init__(self) -> None:
        self._parts: dict[tuple[int, str], _Part] = {}
        self._trainable: set[tuple[int, str]] = set()  # parts seen trainable once: toggled
        self._models: dict[int, ModelInfo] = {}
        self._frozen: dict[int, tuple[tuple[bool, ...], list[tuple[str, Any]]]] = {}

    def on_step_end(self, event: StepEvent) -> None:
        torch = _torch()
        for model in self.monitor.models:
            flags = tuple(p.requires_grad for p in _parameters(model.inner, event))
            if all(flags) and not any(key[0] == id(model) for key in self._parts):
                continue  # nothing frozen, ever: one pass over the flags
            cached = self._frozen.get(id(model))
            if cached is None or cached[0] != flags:
                cached = self._frozen[id(model)] = (flags, frozen_parts(model.inner))
            frozen = cached[1]
            names = {path for path, _ in frozen}
            for key in list(self._parts):
                if key[0] == id(model) and key[1] not in names:
                    self._trainable.add(key)  # unfrozen again: a toggled freeze (GANs)
            for path, module in frozen:
                key = (id(model), path)
                if key in self._trainable:
                    continue
                self._models[id(model)] = model
                part = self._parts.get(key)
                if part is None:
                    part = self._parts[key] = _Part()
                part.training = part.training or module.training
                counts = (
                    torch.stack(
                        [m.num_batches_tracked.detach().float().reshape(()) for m in _norms(module)]
                    )
                    .sum()
                    .reshape(1)
                )
                self.monitor.defer(counts, functools.partial(self._count, key, event.global_step))

    def _count(self, key: tuple[int, str], step: int, values: list[float]) -> None:
        part = self._parts[key]
        if part.counts and values[0] > part.counts[-1]:
            part.rises += 1
            if part.first_step is None:
                part.first_step = step
        part.counts.append(values[0])

    def on_finish(self, report: Report) -> None:
        for (model_id, path), part in self._parts.items():
            if (model_id, path) in self._trainable or part.rises < _MIN_RISES:
                continue
            model = self._models[model_id]
            shown = display_path(self.monitor, model, path)
            location = assignment_location(self.monitor, model, path) or Location(object=shown)
            counted = int(part.counts[-1] - part.counts[0])
            self.emit(
                finding(
                    "TD507",
                    f"`{shown}` is frozen (every parameter has `requires_grad=False`) but still "
                    f"in training mode: its BatchNorm layers counted {counted} more batches "
                    f"between sampled steps (first by step {part.first_step}), so their running "
                    "statistics keep changing. The frozen features drift, and evaluation "
                    "normalises with statistics the head was never trained on",
                    location,
                    Depth.RUN,
                    fix_hint=f"Put the frozen part in eval mode after every `model.train()`: "
                    f"override `train()` to call `self.{path.split('.')[-1]}.eval()` "
                    "after `super().train(mode)`, or call it at the top of each epoch.",
                    evidence={
                        "module": shown,
                        "batches_counted": counted,
                        "sampled_rises": part.rises,
                    },
                )
            )


def _torch() -> Any:
    import torch

    return torch
