"""Train/eval mode: training steps in eval mode (TD502), evaluation in train mode (TD501).

Only modules whose behaviour depends on the mode count: dropout (p > 0, DropPath) and
batch norm that tracks running statistics. TD502 looks at the model an optimizer trains,
at sampled steps, and only when the model itself is in eval mode; a model in train mode
with a backbone put in eval mode on purpose (frozen BatchNorm) is left alone. TD501 looks
at calls of a trained model under ``no_grad``/``inference_mode`` in train mode; it needs
two such calls in a row without an optimizer step between them, which is what an
evaluation loop does and a GAN's ``with torch.no_grad(): fake = G(z)`` does not.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from torchdoctor.findings import Confidence, Depth, Location, Report
from torchdoctor.rules.detectors import detector
from torchdoctor.rules.registry import finding
from torchdoctor.runtime.detectors.base import (
    CallSite,
    ForwardEvent,
    ModelInfo,
    RuntimeDetector,
    StepEvent,
)

__all__ = ["EvalInTrainMode", "TrainInEvalMode", "mode_sensitive_modules"]

_BATCHNORM_BASES = ("_BatchNorm", "_NormBase")


def mode_sensitive_modules(model: Any) -> list[tuple[str, Any]]:
    """``(path, module)`` of the modules that behave differently in train and eval mode."""
    found = []
    for path, module in model.named_modules():
        name = type(module).__name__
        bases = {c.__name__ for c in type(module).__mro__}
        if "Dropout" in name or name == "DropPath":
            p = getattr(module, "p", getattr(module, "drop_prob", 0.0))
            if isinstance(p, (int, float)) and p > 0:
                found.append((path, module))
        elif bases & set(_BATCHNORM_BASES) and getattr(module, "track_running_stats", False):
            found.append((path, module))
    return found


def _describe(modules: list[tuple[str, Any]], limit: int = 3) -> str:
    shown = ", ".join(f"`{p or '<root>'}` ({type(m).__name__})" for p, m in modules[:limit])
    return shown + (f" and {len(modules) - limit} more" if len(modules) > limit else "")


@dataclass(slots=True)
class _Modes:
    train_steps: int = 0
    eval_steps: int = 0
    first_eval: int | None = None
    train_before_eval: bool = False
    site: CallSite | None = None
    eval_modules: list[tuple[str, Any]] = field(default_factory=list)


@detector("TD502", depth=Depth.RUN)
class TrainInEvalMode(RuntimeDetector):
    """Optimizer steps taken while the trained model is in eval mode."""

    sampled_hooks = frozenset({"on_step_begin"})

    def __init__(self) -> None:
        self._sensitive: dict[int, list[tuple[str, Any]]] = {}
        self._modes: dict[int, _Modes] = {}
        self._models: dict[int, ModelInfo] = {}

    def on_model(self, model: ModelInfo) -> None:
        self._sensitive[id(model)] = mode_sensitive_modules(model.inner)
        self._models[id(model)] = model

    def on_step_begin(self, event: StepEvent) -> None:
        if not event.sampled:
            return
        for model in self.monitor.models_of(event.optimizer):
            sensitive = self._sensitive.get(id(model))
            if not sensitive:
                continue
            modes = self._modes.get(id(model))
            if modes is None:
                modes = self._modes[id(model)] = _Modes()
            in_eval = [(p, m) for p, m in sensitive if not m.training]
            if model.inner.training or not in_eval:
                modes.train_steps += 1
                continue
            modes.eval_steps += 1
            if modes.first_eval is None:
                modes.first_eval = event.step
                modes.train_before_eval = modes.train_steps > 0
                modes.site = self.monitor.user_site()
                modes.eval_modules = in_eval

    def on_finish(self, report: Report) -> None:
        for key, modes in self._modes.items():
            if modes.eval_steps >= 2:
                self._emit(self._models[key], modes)

    def _emit(self, model: ModelInfo, modes: _Modes) -> None:
        checked = modes.train_steps + modes.eval_steps
        if modes.train_before_eval:
            why = (
                "it trained in train mode before, so `model.train()` was not called "
                "again after an evaluation"
            )
            confidence = Confidence.HIGH
        else:
            why = (
                "it was in eval mode from the first step (`model.eval()` somewhere, or a "
                "loader that returns models in eval mode)"
            )
            confidence = Confidence.MEDIUM
        where = f"`optimizer.step()` at {modes.site}" if modes.site else "`optimizer.step()`"
        location = (
            modes.site.location(object=model.label) if modes.site else Location(object=model.label)
        )
        self.emit(
            finding(
                "TD502",
                f"{where} trained `{model.label}` in eval mode in {modes.eval_steps} of {checked} "
                f"checked steps, from step {modes.first_eval}: {_describe(modes.eval_modules)} "
                f"were inactive, so dropout is off and BatchNorm normalises with stale running "
                f"statistics; {why}",
                location,
                Depth.RUN,
                confidence=confidence,
                fix_hint="Call `model.train()` at the start of every training epoch (after "
                "each evaluation).",
                evidence={
                    "eval_steps": modes.eval_steps,
                    "checked_steps": checked,
                    "first_eval_step": modes.first_eval,
                    "modules": [p for p, _ in modes.eval_modules],
                },
            )
        )


@dataclass(slots=True)
class _Episode:
    calls: int = 0
    site: CallSite | None = None
    active: list[tuple[str, Any]] = field(default_factory=list)


@detector("TD501", depth=Depth.RUN)
class EvalInTrainMode(RuntimeDetector):
    """Evaluation passes (no-grad calls in a row) of a trained model left in train mode."""

    wants_forward = "no_grad"

    def __init__(self) -> None:
        self._sensitive: dict[int, list[tuple[str, Any]]] = {}
        self._current: dict[int, _Episode] = {}
        self._episodes: dict[int, list[_Episode]] = {}
        self._models: dict[int, ModelInfo] = {}

    def on_model(self, model: ModelInfo) -> None:
        self._sensitive[id(model)] = mode_sensitive_modules(model.inner)
        self._models[id(model)] = model

    def on_forward(self, event: ForwardEvent) -> None:
        model = event.model
        if event.grad_enabled and not event.inference_mode:
            return
        sensitive = self._sensitive.get(id(model))
        if not sensitive or not model.inner.training:
            return
        if not any(m.training for _, m in sensitive) or _recalibrating(sensitive):
            return
        episode = self._current.get(id(model))
        if episode is None:
            episode = self._current[id(model)] = _Episode()
        if episode.calls == 0:
            episode.site = self.monitor.user_site()
            episode.active = [(p, m) for p, m in sensitive if m.training]
            if episode.site is None or _inside_update_bn():
                del self._current[id(model)]
                return
        episode.calls += 1

    def on_step_begin(self, event: StepEvent) -> None:
        self._close()

    def on_finish(self, report: Report) -> None:
        self._close()
        trained = {id(m) for info in self.monitor.optimizers for m in self.monitor.models_of(info)}
        for key, episodes in self._episodes.items():
            if key in trained and episodes:
                self._emit(self._models[key], episodes)

    def _close(self) -> None:
        for key, episode in self._current.items():
            if episode.calls >= 2:
                self._episodes.setdefault(key, []).append(episode)
        self._current.clear()

    def _emit(self, model: ModelInfo, episodes: list[_Episode]) -> None:
        first = episodes[0]
        calls = sum(e.calls for e in episodes)
        active = first.active
        site = first.site
        self.emit(
            finding(
                "TD501",
                f"`{model.label}` was called {calls} times under `torch.no_grad()` in training "
                f"mode ({len(episodes)} evaluation pass{'es' if len(episodes) > 1 else ''}, the "
                f"first at {site}), with {_describe(active)} active: evaluation results are "
                "noisy, and BatchNorm's running statistics absorb the evaluation data",
                site.location(object=model.label) if site else Location(object=model.label),
                Depth.RUN,
                fix_hint="Call `model.eval()` before evaluating and `model.train()` before "
                "training again.",
                evidence={
                    "calls": calls,
                    "passes": len(episodes),
                    "modules": [p for p, _ in active],
                },
            )
        )


def _recalibrating(sensitive: list[tuple[str, Any]]) -> bool:
    """BatchNorm statistics being recomputed on purpose (momentum None, no dropout)."""
    norms = [m for _, m in sensitive if hasattr(m, "momentum")]
    return len(norms) == len(sensitive) and all(m.momentum is None for m in norms)


def _inside_update_bn() -> bool:
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "update_bn" and "swa_utils" in frame.f_code.co_filename:
            return True
        frame = frame.f_back
    return False
