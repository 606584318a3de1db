"""Build the model a checkpoint is compared with, from ``pkg.module:factory`` or a file.

The factory is the user's code, run on the user's request. It may return the model itself,
or what ``torchdoctor check`` takes (a tuple whose first element is the model, or a dict
with a ``"model"`` entry).
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
import traceback
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from torchdoctor.errors import UsageError, UserCodeError

__all__ = ["load_model"]


def load_model(spec: str) -> Any:
    """Call the factory named by ``spec`` and return the ``nn.Module`` it builds.

    Args:
        spec: ``package.module:factory`` or ``path/to/file.py:factory``.

    Raises:
        UsageError: a malformed spec, a missing module or attribute, or a result that holds
            no ``nn.Module``.
        UserCodeError: importing the module or calling the factory raised.
    """
    location, _, name = spec.rpartition(":")
    if not location or not name.isidentifier():
        raise UsageError(f"--model {spec!r}: expected 'package.module:factory' or "
                         "'path/to/file.py:factory'")
    module = _import(location)
    factory = getattr(module, name, None)
    if not callable(factory):
        raise UsageError(f"--model {spec!r}: {location} has no callable {name!r}")
    result = _call_user(factory, f"calling {spec}")
    return _model_from(result, spec)


def _import(location: str) -> ModuleType:
    if location.endswith(".py") or "/" in location or "\\" in location:
        return _import_file(Path(location))
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))  # as `python -c` would see the project
    if importlib.util.find_spec(location.split(".")[0]) is None:
        raise UsageError(f"--model: no module named {location!r} (run from the project "
                         "root, or give a file path: path/to/file.py:factory)")
    module: ModuleType = _call_user(lambda: importlib.import_module(location),
                                    f"importing {location}")
    return module


def _import_file(path: Path) -> ModuleType:
    if not path.is_file():
        raise UsageError(f"--model: no such file {path}")
    name = "torchdoctor_model_" + re.sub(r"\W", "_", path.stem)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UsageError(f"--model: cannot import {path} as Python")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    # The file's own directory comes first, so its sibling imports work as in its script.
    sys.path.insert(0, str(path.resolve().parent))
    loader = spec.loader
    _call_user(lambda: loader.exec_module(module), f"importing {path}")
    return module


def _call_user(call: Any, doing: str) -> Any:
    try:
        return call()
    except UsageError:
        raise
    except Exception as error:  # noqa: BLE001 - the user's code may raise anything
        frames = traceback.extract_tb(error.__traceback__)
        where = f"{frames[-1].filename}:{frames[-1].lineno}" if frames else None
        raise UserCodeError(f"{doing} raised {type(error).__name__}: {error}"
                            + (f" (at {where})" if where else ""),
                            original=error, where=where) from None


def _model_from(result: Any, spec: str) -> Any:
    import torch

    candidate = result
    if isinstance(result, (tuple, list)) and result:
        candidate = result[0]
    elif isinstance(result, Mapping):
        candidate = result.get("model")
    if not isinstance(candidate, torch.nn.Module):
        raise UsageError(f"--model {spec!r} returned {type(result).__name__}; expected an "
                         "nn.Module, a tuple starting with one, or a dict with 'model'")
    return candidate
