"""Wrapping a few torch entry points for the run, and undoing it: attribute patches that
are removed if nobody patched over them, and wrapper makers whose callbacks can never raise
into the user's code. Run detectors (``load_state_dict``) and the cross-rank detectors
(:mod:`torchdoctor.distributed.tracking`) share them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torchdoctor._kernel import raised_by_signal_handler

__all__ = ["Patches", "after_call", "before_call", "remove_dead"]

# Every patch in place, oldest first: (its Patches, owner, name, original, ours). A patch
# stays listed until its original is back, so that one another patch covered when its
# owner went is restored once that one goes too (see remove_dead).
_INSTALLED: list[tuple[Patches, Any, str, Any, Any]] = []

_ABSENT = object()  # the original of an attribute that did not exist before its patch


class Patches:
    """Attribute patches, each undone by :meth:`remove` if nobody patched over it."""

    def __init__(self, alive: Callable[[], bool] = lambda: True) -> None:
        self.active = True
        self.alive = alive  # False once the owner is gone: the next call removes them all

    def live(self) -> bool:
        """Whether callbacks should run; removes every patch once the owner is gone (a
        detector switched off after a failure never reaches its ``on_finish``)."""
        if self.active and not self.alive():
            self.remove()
        return self.active

    def wrap(
        self, owner: Any, name: str, make: Callable[[Callable[..., Any]], Callable[..., Any]]
    ) -> bool:
        """Replace ``owner.name`` by ``make(original)``; ``False`` when it does not exist."""
        original = getattr(owner, name, None)
        if original is None:
            return False
        ours = make(original)
        ours.__wrapped__ = original  # type: ignore[attr-defined]
        ours.__doc__ = getattr(original, "__doc__", None)
        setattr(owner, name, ours)
        _INSTALLED.append((self, owner, name, original, ours))
        return True

    def add(self, owner: Any, name: str, value: Any) -> bool:
        """Give ``owner`` an attribute it does not have itself (a class's
        ``__deepcopy__``); ``False`` when it already has one. :meth:`remove` deletes it."""
        if name in vars(owner):
            return False
        setattr(owner, name, value)
        _INSTALLED.append((self, owner, name, _ABSENT, value))
        return True

    def remove(self) -> None:
        """Restore the originals, newest first (those patched over wait for
        :func:`remove_dead`)."""
        self.active = False
        _restore(lambda patches: patches is self)


def remove_dead() -> None:
    """Restore, newest first, every patch whose owner is gone (a monitor that ended, or
    failed before its detectors' ``on_finish``) or that was removed while covered.

    Called whenever a monitor ends or starts: a detector's patch never outlives its run,
    and a later run never wraps a patch of an earlier one.
    """
    _restore(lambda patches: not patches.active or not patches.alive())


def _restore(chosen: Callable[[Patches], bool]) -> None:
    kept = []
    # Newest first: a patch over another is undone before the one below it.
    for entry in reversed(_INSTALLED):
        patches, owner, name, original, ours = entry
        if not chosen(patches):
            kept.append(entry)
            continue
        patches.active = False
        current = getattr(owner, name, None)
        if current is ours:
            if original is _ABSENT:
                delattr(owner, name)
            else:
                setattr(owner, name, original)
        elif current is not None and _wraps(current, ours):
            kept.append(entry)  # a live patch covers it: restored when that one goes
    _INSTALLED[:] = reversed(kept)


def _wraps(function: Any, ours: Any) -> bool:
    """Whether ``ours`` is somewhere below ``function`` in a chain of wrappers."""
    for _ in range(64):
        function = getattr(function, "__wrapped__", None)
        if function is None:
            return False
        if function is ours:
            return True
    return False


def after_call(
    patches: Patches, callback: Callable[..., None], on_error: Callable[[BaseException], None]
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A wrapper maker: call the original, then ``callback(result, *args, **kwargs)``;
    an error of the callback goes to ``on_error``, never to the user's code."""

    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            if patches.live():
                try:
                    callback(result, *args, **kwargs)
                except Exception as error:  # noqa: BLE001 - never break the user's call
                    if raised_by_signal_handler(error):
                        raise  # the run's own signal handler: the exception is theirs
                    patches.active = False
                    on_error(error)
            return result

        return wrapper

    return make


def before_call(
    patches: Patches, callback: Callable[..., None], on_error: Callable[[BaseException], None]
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A wrapper maker: call ``callback(*args, **kwargs)``, then the original."""

    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if patches.live():
                try:
                    callback(*args, **kwargs)
                except Exception as error:  # noqa: BLE001 - never break the user's call
                    if raised_by_signal_handler(error):
                        raise  # the run's own signal handler: the exception is theirs
                    patches.active = False
                    on_error(error)
            return original(*args, **kwargs)

        return wrapper

    return make
