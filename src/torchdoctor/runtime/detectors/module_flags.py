"""``module.requires_grad = False`` seen at run time (TD221, whose lint and check halves
read the assignment and the attribute before training).

The invariant: a module marked as not requiring grad gets no gradient and does not change.
Assigning ``requires_grad`` on an ``nn.Module`` sets a plain Python attribute (the method
is ``requires_grad_()``): its parameters keep ``requires_grad=True``, receive gradients,
and change when an optimizer holds them. On sampled steps (gradients final), every module
of the known models whose own ``requires_grad`` attribute is ``False`` is looked at: its
parameters that still require grad, whether they hold a gradient, and a fingerprint of
their values taken when the attribute is first seen, compared at the end.

The assignment itself is seen as it happens (``nn.Module.__setattr__`` is wrapped for the
run: one name comparison per module attribute set), so a module marked mid-run is
fingerprinted at the next optimizer step, whatever the sampling, and the finding points at
the user's line that made the assignment. The sampled sweep of the known models' modules
still finds attributes set before the run was watched.

Policy for correct programs that look alike: a module whose parameters were frozen as well
(``requires_grad_(False)`` beside the attribute) is frozen, and is not reported; a class
that defines ``requires_grad`` itself (a property, a class attribute) is not an assigned
attribute and is never looked at.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import repeat
from operator import is_, methodcaller
from pathlib import Path
from typing import Any

from torchdoctor.findings import Depth, Location, Report
from torchdoctor.rules.detectors import detector
from torchdoctor.rules.registry import finding
from torchdoctor.runtime.detectors.base import (
    CallSite,
    ModelInfo,
    MonitorView,
    RuntimeDetector,
    StepEvent,
)
from torchdoctor.runtime.detectors.places import display_path
from torchdoctor.runtime.detectors.tree import submodules_at
from torchdoctor.runtime.patches import Patches, after_call

__all__ = ["RequiresGradOnModule"]

_SLICE = 1024  # values fingerprinted per parameter


@dataclass(slots=True)
class _Marked:
    """A module whose ``requires_grad`` attribute is ``False``, as first seen."""

    model: ModelInfo
    path: str
    module: Any
    params: list[Any]
    start: list[Any]
    got_gradient: bool = False
    first_step: int = 0
    site: CallSite | None = None


@detector("TD221", depth=Depth.RUN)
class RequiresGradOnModule(RuntimeDetector):
    """Flags modules given ``requires_grad = False`` whose parameters still train."""

    def __init__(self) -> None:
        self._marked: dict[int, _Marked] = {}
        self._assigned: dict[int, tuple[Any, CallSite | None]] = {}  # id -> (module, line)
        self._patches = Patches(alive=self.attached)

    def on_attach(self, monitor: MonitorView) -> None:
        super().on_attach(monitor)
        import torch

        self._patches.wrap(
            torch.nn.Module, "__setattr__", after_call(self._patches, self._set, _ignore)
        )

    def _set(self, result: Any, module: Any, name: Any, value: Any) -> None:
        if name == "requires_grad" and value is False:
            self._assigned[id(module)] = (module, self.monitor.user_site())

    def on_step_begin(self, event: StepEvent) -> None:
        if self._assigned:
            self._mark_assigned(event.global_step)
        if event.sampled:
            self._sweep(event)

    def _mark_assigned(self, step: int) -> None:
        assigned, self._assigned = self._assigned, {}
        for module, site in assigned.values():
            if id(module) in self._marked or vars(module).get("requires_grad") is not False:
                continue
            model = next(
                (
                    model
                    for model in self.monitor.models
                    if any(inner is module for inner in model.inner.modules())
                ),
                None,
            )
            if model is None:
                continue  # a module outside the watched models
            marked = self._mark(model, module, step)
            if marked is not None:
                marked.site = site

    def _sweep(self, event: StepEvent) -> None:
        for model in self.monitor.models:
            modules = submodules_at(event, model.inner)  # sampled steps: no names built
            # The flags read in C first: most models have no module with one.
            flags = map(methodcaller("get", "requires_grad"), map(vars, modules))
            if not any(map(is_, flags, repeat(False))):
                continue
            for module in modules:
                if vars(module).get("requires_grad") is not False:
                    continue
                marked = self._marked.get(id(module))
                if marked is None:
                    marked = self._mark(model, module, event.global_step)
                if marked is not None:
                    marked.got_gradient = marked.got_gradient or any(
                        p.requires_grad and p.grad is not None for p in marked.params
                    )

    def _mark(self, model: ModelInfo, module: Any, step: int) -> _Marked | None:
        params = [p for p in module.parameters() if p.requires_grad]
        if not params:
            return None  # frozen for real as well
        path = next(p for p, m in model.inner.named_modules() if m is module)
        torch = _torch()
        with torch.no_grad():
            start = [p.detach().reshape(-1)[:_SLICE].clone() for p in params]
        marked = _Marked(model, path, module, params, start, first_step=step)
        self._marked[id(module)] = marked
        return marked

    def on_finish(self, report: Report) -> None:
        self._patches.remove()
        self._assigned.clear()
        torch = _torch()
        for marked in self._marked.values():
            with torch.no_grad():
                changed = sum(
                    1
                    for p, s in zip(marked.params, marked.start, strict=True)
                    if p.requires_grad and not torch.equal(p.detach().reshape(-1)[:_SLICE], s)
                )
            if not changed and not marked.got_gradient:
                continue
            shown = display_path(self.monitor, marked.model, marked.path)
            what = (
                f"and {changed} of its {len(marked.params)} parameters changed during training"
                if changed
                else "and its parameters still received gradients"
            )
            site = marked.site or _assignment(self.monitor, marked.model, marked.path)
            self.emit(
                finding(
                    "TD221",
                    f"`{shown}` was given `requires_grad = False` as an attribute, which "
                    "freezes nothing on a module: its parameters kept `requires_grad=True`, "
                    f"{what} (seen from step {marked.first_step})",
                    site.location(object=shown) if site else Location(object=shown),
                    Depth.RUN,
                    fix_hint=f"Call `{shown}.requires_grad_(False)` (the method) to freeze "
                    "its parameters.",
                    evidence={
                        "module": shown,
                        "parameters_changed": changed,
                        "received_gradients": marked.got_gradient,
                    },
                )
            )
        self._marked.clear()


def _assignment(monitor: Any, model: ModelInfo, path: str) -> CallSite | None:
    """The user's ``<...>.<name>.requires_grad = ...`` line for the module at ``path``:
    the first in the script or the model's classes' files; for a root model, the only one."""
    name = path.rpartition(".")[2]
    receiver = re.escape(name) if name else r"\w+"
    # a statement that starts the line: never a docstring or a comment that mentions it
    pattern = re.compile(rf"^\s*(?:[\w.]*\.)?{receiver}\.requires_grad\s*=(?!=)")
    files: list[Path] = [monitor.script] if monitor.script is not None else []
    for module in model.inner.modules():
        code = getattr(getattr(type(module), "__init__", None), "__code__", None)
        if code is not None and monitor.is_user_file(code.co_filename):
            files.append(Path(code.co_filename))
    hits: list[CallSite] = []
    for file in dict.fromkeys(f.resolve() for f in files):
        try:
            lines = file.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError):
            continue
        hits += [
            CallSite(str(file), number, "<module>", True)
            for number, line in enumerate(lines, start=1)
            if pattern.search(line)
        ]
    if name:
        return hits[0] if hits else None
    return hits[0] if len(hits) == 1 else None


def _ignore(error: BaseException) -> None:
    """A failure while watching assignments only loses the exact line (the sweep remains)."""


def _torch() -> Any:
    import torch

    return torch
