"""Progress of long operations, for a display that the command line chooses to show.

The API stays silent: ``check`` and ``lint`` call :func:`advance` as they go, and nothing
happens unless a listener was installed with :func:`listening` (the CLI installs one on a
terminal). A listener that raises is ignored: a display never breaks the work.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from contextvars import ContextVar

__all__ = ["Listener", "advance", "listening"]

Listener = Callable[[str, str, int, int], None]
"""``listener(task, item, done, total)``: ``done`` of ``total`` items of ``task`` are
finished, ``item`` is the one starting now (empty when the task is complete)."""

_LISTENER: ContextVar[Listener | None] = ContextVar("torchdoctor_progress", default=None)


def advance(task: str, item: str, done: int, total: int) -> None:
    """Tell the listener, if any, how far ``task`` has come."""
    listener = _LISTENER.get()
    if listener is None:
        return
    with suppress(Exception):  # a display must never break the work
        listener(task, item, done, total)


@contextmanager
def listening(listener: Listener | None) -> Iterator[None]:
    """Send the progress of the work done inside the block to ``listener``."""
    token = _LISTENER.set(listener)
    try:
        yield
    finally:
        _LISTENER.reset(token)
