"""torchdoctor: finds the silent bugs in PyTorch training code.

Three depths over one catalogue of problems and one report:

* :func:`lint` reads source code (never imports or runs it, needs no torch);
* :func:`check` pre-flights a model, a batch, a loss and an optimizer;
* :func:`watch` monitors a real training run.

Everything not listed in ``__all__`` is internal and may change. Importing this package
does not import torch; the functions that need it import it when called.
"""

from __future__ import annotations

from typing import Any

from torchdoctor.__about__ import __version__
from torchdoctor.errors import TorchDoctorError, TorchMissingError, UsageError, UserCodeError
from torchdoctor.findings import (
    Applicability,
    Confidence,
    Depth,
    Edit,
    Finding,
    Fix,
    Location,
    Report,
    Severity,
)
from torchdoctor.rules.registry import RULES, Rule, get_rule

__all__ = [
    "RULES",
    "Applicability",
    "Confidence",
    "Depth",
    "Edit",
    "Finding",
    "Fix",
    "Location",
    "Report",
    "Rule",
    "Severity",
    "TorchDoctorError",
    "TorchMissingError",
    "UsageError",
    "UserCodeError",
    "__version__",
    "check",
    "get_rule",
    "lint",
    "watch",
]

# Public functions whose modules load on first use (they may need torch).
_LAZY = {
    "check": "torchdoctor.preflight:check",
    "lint": "torchdoctor.static:lint",
    "watch": "torchdoctor.runtime:watch",
}


def __getattr__(name: str) -> Any:
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'torchdoctor' has no attribute {name!r}")
    import importlib

    module_name, attribute = target.split(":")
    value = getattr(importlib.import_module(module_name), attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
