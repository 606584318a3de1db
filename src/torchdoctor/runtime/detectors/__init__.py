"""Runtime detectors: every module of this package, the order-sensitive ones first by name.

Importing this package registers every runtime detector with
:func:`torchdoctor.rules.detectors.detector`. The interface they implement is in
:mod:`torchdoctor.runtime.detectors.base`.
"""

from __future__ import annotations

import importlib
import pkgutil

# One module per topic, listed by name. Hooks run in this order, and `on_finish` sees the
# findings of the modules before it: a detector may stay quiet when an earlier one already
# reported the root cause (exploding gradients defer to uncleared gradients, parameters
# that never change defer to vanishing gradients).
_MODULES = (
    "root_causes",
    "gradients",
    "nonfinite",
    "scale",
    "updates",
    "coverage",
    "loss",
    "modes",
    "graph",
    "memory",
    "pipeline",
    "exceptions",
    "warnings",
    "compile",
    "schedules",
    "freezing",
)

# Every other module of this package follows, alphabetically: a new detector module needs
# no line here, unless its `on_finish` must run before another module's.
_UNLISTED = sorted(
    info.name for info in pkgutil.iter_modules(__path__) if info.name not in _MODULES
)

for _name in (*_MODULES, *_UNLISTED):
    importlib.import_module(f"{__name__}.{_name}")
importlib.import_module("torchdoctor.distributed.detectors")  # cross-rank checks (TD8xx)
