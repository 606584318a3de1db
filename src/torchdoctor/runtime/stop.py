"""``StopTraining``: how ``max_steps`` ends a watched run. A leaf module, so that whatever
raises or catches it needs nothing else of the runtime."""

from __future__ import annotations

__all__ = ["StopTraining"]


class StopTraining(BaseException):  # noqa: N818 - named for what it does, like SystemExit
    """Raised from ``optimizer.step()`` once ``max_steps`` steps have run.

    It derives from ``BaseException`` so that a user's ``except Exception`` does not swallow
    it; :func:`torchdoctor.watch` and ``torchdoctor run`` catch it and end cleanly.
    """
