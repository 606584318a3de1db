"""The runtime depth: watch a real training run through PyTorch's global hooks.

* :func:`watch` monitors code inside a ``with`` block (the Python API);
* :func:`run_script` runs a script or module exactly as ``python`` would, under the monitor
  (what ``torchdoctor run`` calls).

Detectors implement :class:`~torchdoctor.runtime.detectors.base.RuntimeDetector`.
Importing this package does not import torch; starting a monitor does.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ScriptResult", "StopTraining", "Watch", "run_script", "watch"]

_LAZY = {
    "watch": "torchdoctor.runtime.watch",
    "Watch": "torchdoctor.runtime.watch",
    "run_script": "torchdoctor.runtime.script",
    "ScriptResult": "torchdoctor.runtime.script",
    "StopTraining": "torchdoctor.runtime.stop",
}


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'torchdoctor.runtime' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value
