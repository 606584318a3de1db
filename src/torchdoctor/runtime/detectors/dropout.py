"""Functional dropout left on in eval mode (TD506 at run time; ``lint`` finds the call).

The invariant: a module in eval mode computes a deterministic forward. ``F.dropout(x, p)``
and its siblings (``dropout1d/2d/3d``, ``alpha_dropout``, ``feature_alpha_dropout``) take
``training=True`` by default, whatever the module's mode, so a call that leaves it out keeps
zeroing activations after ``model.eval()``. The functionals are wrapped for the run; a call
that passes ``training`` (every ``nn.Dropout`` layer does, and so does code written
``training=self.training``) returns through the wrapper at the cost of one length test.
Only a call that leaves ``training`` out, with ``p > 0``, looks up the stack for the
nearest method of an ``nn.Module`` (the forward, or a helper method it calls): a module in
eval mode there is the violation.

Policy for intentional stochastic evaluation (Monte-Carlo dropout): a ``training``
argument written out (``training=True``, ``training=self.mc_samples > 0``) states intent
and is never reported; so is an ``nn.Dropout`` layer switched back to ``train()`` inside
an evaluated model (it passes its own mode). A call outside any module's method (a plain
function applied to data) has no mode to follow and is quiet. The wrapper is made with
``torch.nn.functional``'s globals, so TorchScript still compiles the original function.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from typing import Any

from torchdoctor._kernel import raised_by_signal_handler
from torchdoctor.findings import Depth, Report
from torchdoctor.rules.detectors import detector
from torchdoctor.rules.registry import finding
from torchdoctor.runtime.detectors.base import MonitorView, RuntimeDetector
from torchdoctor.runtime.patches import Patches
from torchdoctor.static.torchapi import DROPOUT_FUNCTIONS

__all__ = ["FunctionalDropoutInEval"]

_FRAMES = 8  # frames searched above the call for a module's method


@detector("TD506", depth=Depth.RUN)
class FunctionalDropoutInEval(RuntimeDetector):
    """Reports functional dropout left at its default ``training=True`` inside a method of
    a module in eval mode."""

    def __init__(self) -> None:
        self._patches = Patches(alive=self._attached)
        self._error: BaseException | None = None
        self._active: Callable[[], Any] = lambda: None
        self._compiling: Callable[[], bool] | None = None
        self._reported: set[tuple[Any, int]] = set()  # (code, line) of the calls reported
        self.calls = 0  # default-training calls judged (for the benchmark)
        # (code, line) of a call -> frames up to the module's method (None: no method)
        self._depths: dict[tuple[Any, int], int | None] = {}

    def on_attach(self, monitor: MonitorView) -> None:
        super().on_attach(monitor)
        import torch.nn.functional as functional

        from torchdoctor.runtime.monitor import active_monitor

        self._active = active_monitor  # looked up once: the wrapper asks at every call
        self._compiling = getattr(getattr(torch_module(), "compiler", None), "is_compiling", None)

        for name in DROPOUT_FUNCTIONS:
            self._patches.wrap(functional, name, self._wrapper_maker(name, vars(functional)))

    def _attached(self) -> bool:
        return self._active() is getattr(self, "monitor", None)

    def _wrapper_maker(
        self, name: str, namespace: dict[str, Any]
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        judge, patches = self._guarded, self._patches

        def make(original: Callable[..., Any]) -> Callable[..., Any]:
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                if len(args) < 3 and "training" not in kwargs and patches.live():
                    judge(name, args, kwargs)
                return original(*args, **kwargs)

            # TorchScript compiles the original's source (it follows ``__wrapped__``) and
            # resolves its names in the wrapper's globals: give it the module's.
            return types.FunctionType(wrapper.__code__, namespace, name, None, wrapper.__closure__)

        return make

    def _guarded(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        try:
            self._judge(name, args, kwargs, sys._getframe(2))  # here, the wrapper, the caller
        except Exception as error:  # noqa: BLE001 - never break the user's call
            if raised_by_signal_handler(error):
                raise
            self._patches.active = False
            self._error = error

    def _judge(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any], caller: Any) -> None:
        if not getattr(self.monitor, "enabled", True):  # off in a forked DataLoader worker
            return
        site = (caller.f_code, caller.f_lineno)
        if site in self._reported:
            return
        p = args[1] if len(args) > 1 else kwargs.get("p", 0.5)
        if not isinstance(p, (int, float)) or p <= 0 or self._compiling_now():
            return
        self.calls += 1
        depth = self._depths.get(site, -1)
        if depth == -1:  # first call from this line: find how far up the method is
            depth = self._depths[site] = _method_depth(caller)
        owner = _first_argument(caller, depth) if depth is not None else None
        if owner is None or owner.training:
            return
        self._reported.add(site)
        kind = type(owner).__name__
        path = self.monitor.module_path(owner) or kind
        where = f"`{path}` ({kind})" if path != kind else f"`{kind}`"
        self.emit(
            finding(
                "TD506",
                f"`F.{name}(..., p={p})` runs with its default `training=True` inside "
                f"{where}, which is in eval mode: evaluation "
                f"still drops {p:.0%} of these activations at random, so its metrics are "
                "noisy and lower than the model's.",
                self.monitor.user_location(caller, object=path),
                Depth.RUN,
                fix_hint="Pass `training=self.training` (or use an `nn.Dropout` layer, "
                "which follows `model.eval()`).",
                evidence={"function": name, "p": float(p), "module": path},
            )
        )

    def _compiling_now(self) -> bool:
        """Whether torch.compile is tracing (the stack is then not the user's)."""
        return self._compiling is not None and bool(self._compiling())

    def on_finish(self, report: Report) -> None:
        self._patches.remove()
        if self._error is not None:
            raise self._error  # a failure of ours in the wrapper: one TD001, as elsewhere


def torch_module() -> Any:
    import torch

    return torch


def _method_depth(frame: Any) -> int | None:
    """How many frames above ``frame`` the nearest method of an ``nn.Module`` is (the
    forward, or a helper method it calls; a closure inside one is looked through)."""
    from torch import nn

    for depth in range(_FRAMES):
        if frame is None:
            return None
        code = frame.f_code
        if code.co_argcount:
            first = frame.f_locals.get(code.co_varnames[0])
            if isinstance(first, nn.Module) and _is_method(type(first), code):
                return depth
        frame = frame.f_back
    return None


def _first_argument(frame: Any, depth: int) -> Any:
    """The first argument of the frame ``depth`` above ``frame``, if it is a module."""
    from torch import nn

    for _ in range(depth):
        frame = frame.f_back
        if frame is None:
            return None
    first = frame.f_locals.get(frame.f_code.co_varnames[0]) if frame.f_code.co_argcount else None
    return first if isinstance(first, nn.Module) else None


def _is_method(cls: type, code: Any) -> bool:
    """Whether ``code`` is the body of ``cls``'s method of that name (through decorators
    that keep ``__wrapped__``): a function that merely takes a model first is not."""
    function = getattr(cls, code.co_name, None)
    for _ in range(4):
        if function is None:
            return False
        function = getattr(function, "__func__", function)
        if getattr(function, "__code__", None) is code:
            return True
        function = getattr(function, "__wrapped__", None)
    return False
