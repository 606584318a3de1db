"""Runtime detectors, imported by name (nothing is discovered by scanning).

Importing this package registers every runtime detector with
:func:`torchdoctor.rules.detectors.detector`. The interface they implement is in
:mod:`torchdoctor.runtime.detectors.base`.
"""

from __future__ import annotations

import importlib
import importlib.util

# One module per topic, listed by name. Hooks run in this order, and `on_finish` sees the
# findings of the modules before it: a detector may stay quiet when an earlier one already
# reported the root cause (exploding gradients defer to uncleared gradients, parameters
# that never change defer to vanishing gradients).
_MODULES = (
    "gradients",
    "nonfinite",
    "scale",
    "coverage",
    "loss",
    "modes",
    "graph",
    "memory",
    "pipeline",
)

# The exception explainer, warning capture and torch.compile detectors land in their own
# modules; each is imported by name as soon as its file exists.
_OPTIONAL_MODULES = ("exceptions", "warnings", "compile")

for _name in _MODULES:
    importlib.import_module(f"{__name__}.{_name}")
for _name in _OPTIONAL_MODULES:
    if importlib.util.find_spec(f"{__name__}.{_name}") is not None:
        importlib.import_module(f"{__name__}.{_name}")
