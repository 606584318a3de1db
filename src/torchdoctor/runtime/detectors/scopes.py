"""Reading the variables of a live frame without keeping them alive.

Before Python 3.13, ``frame.f_locals`` of a function frame builds a dict, caches it on the
frame, and that dict holds every value it saw until the frame ends or is read again. A
detector that looks at the user's variables (to name the holder of a loss graph, to find a
``GradScaler``) would then keep the user's tensors, and their autograd graphs, alive for
the rest of the user's function: a leak made by torchdoctor itself.
"""

from __future__ import annotations

import inspect
from types import FrameType
from typing import Any

__all__ = ["local_items"]


def local_items(frame: FrameType) -> list[tuple[str, Any]]:
    """The ``(name, value)`` pairs of ``frame``'s local variables, snapshot left empty.

    Emptying the cached dict is safe: Python refills it from the frame before anyone else
    (``locals()``, a debugger, a trace function) reads it. Only function frames are
    emptied; a module's or class body's ``f_locals`` is its real namespace.
    """
    scope = frame.f_locals
    items = list(scope.items())
    if type(scope) is dict and frame.f_code.co_flags & inspect.CO_OPTIMIZED:
        scope.clear()
    return items
