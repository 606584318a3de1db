"""Runtime detectors, imported by name (nothing is discovered by scanning).

Importing this package registers every runtime detector with
:func:`torchdoctor.rules.detectors.detector`. The interface they implement is in
:mod:`torchdoctor.runtime.detectors.base`.
"""

from __future__ import annotations

import importlib

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
)

for _name in _MODULES:
    importlib.import_module(f"{__name__}.{_name}")
importlib.import_module("torchdoctor.distributed.detectors")  # cross-rank checks (TD8xx)
