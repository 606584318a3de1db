"""Installing and removing the monitor's hooks into PyTorch and Python.

Where PyTorch has a global hook, it is used: ``register_optimizer_step_pre_hook`` /
``post_hook`` (torch >= 2.0) and ``register_module_forward_pre_hook`` (discovery only).
Four things have no hook and are wrapped instead, restored on exit only if still ours:
``torch.autograd.backward`` (every ``loss.backward()`` goes through it), the ``__next__`` of
DataLoader iterators, ``warnings.showwarning``, and ``Optimizer.__init__`` (to know where
each optimizer was built). Every installation is feature-checked,
so a missing API only switches off what needs it; :meth:`HookSet.remove` undoes all of it.
"""

from __future__ import annotations

import importlib
import re
import time
import warnings
from collections.abc import Callable
from types import ModuleType
from typing import Any

__all__ = ["HookSet", "global_forward_hook"]

_COMPILE_HOOK_WARNING = r"Using `torch\.compile\(module\)` when there are global hooks"


class _HookAndFilter:
    """A hook handle that also owns a warnings filter; both go on :meth:`remove`.

    The filter list is changed without telling the warnings machinery that filters
    changed: that would clear every module's record of the warnings already shown, and
    each warning of the user's script would be shown again. An "ignore" filter needs no
    such reset (ignored warnings are never recorded), so the user's output is unchanged.
    """

    def __init__(self, handle: Any, message: str) -> None:
        self._handle = handle
        self._filter = ("ignore", re.compile(message), Warning, None, 0)
        warnings.filters.insert(0, self._filter)  # type: ignore[attr-defined]

    def remove(self) -> None:
        self._handle.remove()
        if self._filter in warnings.filters:
            warnings.filters.remove(self._filter)  # type: ignore[attr-defined]


def global_forward_hook(hook: Callable[..., None]) -> Any:
    """A global forward hook (``hook(module, args, output)`` after every module call),
    with torch.compile's warning about global hooks hidden while it exists; ``None``
    when torch has no global hooks. Detectors use it instead of a hook on each module:
    a hook object left on a model makes it unpicklable and unscriptable."""
    module = importlib.import_module("torch.nn.modules.module")
    register = getattr(module, "register_module_forward_hook", None)
    if register is None:
        return None
    return _HookAndFilter(register(hook), _COMPILE_HOOK_WARNING)


class _Relay:
    """The callback a wrapper calls, dropped on :meth:`HookSet.remove`.

    A wrapper can outlive its patch: whoever looked ``torch.autograd.backward`` up while
    it was installed may keep it (torch._dynamo caches its rules per function object). It
    must then call straight through, and must not keep the monitor, and with it the user's
    models, alive.
    """

    __slots__ = ("callback",)

    def __init__(self, callback: Callable[..., None]) -> None:
        self.callback: Callable[..., None] | None = callback

    def __call__(self, *args: Any) -> None:
        callback = self.callback
        if callback is not None:
            callback(*args)


class HookSet:
    """The monitor's installed hooks and patches; everything is removable."""

    def __init__(self, torch: ModuleType) -> None:
        self._torch = torch
        self._handles: list[Any] = []
        self._patches: list[tuple[Any, str, Any, Any]] = []  # (owner, name, original, ours)
        self._relays: list[_Relay] = []
        self.missing: list[str] = []

    # -- global hooks --------------------------------------------------------------------

    def optimizer_hooks(self, pre: Callable[..., None], post: Callable[..., None]) -> None:
        """Global ``optimizer.step()`` pre/post hooks."""
        optim = importlib.import_module("torch.optim.optimizer")
        register_pre = getattr(optim, "register_optimizer_step_pre_hook", None)
        register_post = getattr(optim, "register_optimizer_step_post_hook", None)
        if register_pre is None or register_post is None:
            self.missing.append("optimizer step hooks")
            return
        self._handles += [register_pre(pre), register_post(post)]

    def module_forward_pre_hook(self, hook: Callable[..., None]) -> Any:
        """Global forward pre-hook on every module call; returns a handle to remove early.

        While it is installed, torch.compile warns that global hooks fire an extra time
        for its wrapper; that warning is about our hook, not the user's code, so a filter
        hides exactly it for as long as the hook exists.
        """
        module = importlib.import_module("torch.nn.modules.module")
        register = getattr(module, "register_module_forward_pre_hook", None)
        if register is None:
            self.missing.append("module forward hooks")
            return None
        handle = _HookAndFilter(register(hook), _COMPILE_HOOK_WARNING)
        self._handles.append(handle)
        return handle

    def module_hook(self, handle: Any) -> None:
        """Remember a per-module hook handle so that :meth:`remove` removes it."""
        self._handles.append(handle)

    # -- wrappers ------------------------------------------------------------------------

    def wrap_backward(self, before: Callable[[Any, Any], None]) -> None:
        """Call ``before(tensors, retain_graph)`` ahead of every ``torch.autograd.backward``."""
        autograd = self._torch.autograd
        original = autograd.backward
        before = self._relay(before)

        def backward(
            tensors: Any,
            grad_tensors: Any = None,
            retain_graph: Any = None,
            *args: Any,
            **kwargs: Any,
        ) -> Any:
            before(tensors, retain_graph)
            return original(tensors, grad_tensors, retain_graph, *args, **kwargs)

        backward.__wrapped__ = original  # type: ignore[attr-defined]
        backward.__doc__ = original.__doc__
        self._patch(autograd, "backward", original, backward)

    def wrap_optimizer_init(self, created: Callable[[Any], None]) -> None:
        """Call ``created(optimizer)`` when an optimizer is built (``Optimizer.__init__``,
        which every torch optimizer and most others call), to learn where that was."""
        base = self._torch.optim.Optimizer
        original = base.__dict__.get("__init__")
        if original is None:
            self.missing.append("optimizer construction sites")
            return
        created = self._relay(created)

        def __init__(optimizer: Any, *args: Any, **kwargs: Any) -> None:
            original(optimizer, *args, **kwargs)
            created(optimizer)

        __init__.__wrapped__ = original  # type: ignore[attr-defined]
        __init__.__doc__ = original.__doc__
        self._patch(base, "__init__", original, __init__)

    def wrap_loader_next(self, after: Callable[[Any, float, bool], None]) -> None:
        """Call ``after(iterator, seconds_waited, first)`` after each DataLoader batch."""
        module = importlib.import_module("torch.utils.data.dataloader")
        base = getattr(module, "_BaseDataLoaderIter", None)
        original = getattr(base, "__next__", None)
        if original is None:
            self.missing.append("DataLoader timing")
            return
        clock = time.perf_counter
        after = self._relay(after)

        def __next__(iterator: Any) -> Any:
            first = getattr(iterator, "_num_yielded", 1) == 0
            start = clock()
            batch = original(iterator)
            after(iterator, clock() - start, first)
            return batch

        self._patch(base, "__next__", original, __next__)

    def wrap_showwarning(self, seen: Callable[[Any, Any, str, int], None]) -> None:
        """Call ``seen(message, category, filename, lineno)`` for every warning shown."""
        original = warnings.showwarning
        seen = self._relay(seen)

        def showwarning(
            message: Any,
            category: Any,
            filename: str,
            lineno: int,
            file: Any = None,
            line: Any = None,
        ) -> None:
            seen(message, category, filename, lineno)
            original(message, category, filename, lineno, file, line)

        self._patch(warnings, "showwarning", original, showwarning)

    def _relay(self, callback: Callable[..., None]) -> _Relay:
        relay = _Relay(callback)
        self._relays.append(relay)
        return relay

    def _patch(self, owner: Any, name: str, original: Any, ours: Any) -> None:
        setattr(owner, name, ours)
        self._patches.append((owner, name, original, ours))

    # -- removal -------------------------------------------------------------------------

    def remove(self) -> None:
        """Remove every hook and undo every patch that is still ours."""
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        for owner, name, original, ours in reversed(self._patches):
            # Someone patched over us: leave theirs in place rather than break it.
            if getattr(owner, name, None) is ours:
                setattr(owner, name, original)
        self._patches.clear()
        for relay in self._relays:
            relay.callback = None
        self._relays.clear()
