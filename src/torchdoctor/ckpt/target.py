"""Build the model a checkpoint is compared with, from ``pkg.module:factory`` or a file.

The factory is the user's code, run on the user's request. It may return the model itself,
or what ``torchdoctor check`` takes (a tuple whose first element is the model, or a dict
with a ``"model"`` entry). Importing it is :func:`torchdoctor._usercode.load_factory`'s
job, the one importer of user factories (``check`` uses it too); this module only words
its errors for ``--model`` and picks the model out of what the factory returns.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torchdoctor.errors import UsageError

__all__ = ["load_model"]

_FORMAT = "expected 'package.module:factory' or 'path/to/file.py:factory'"


def load_model(spec: str) -> Any:
    """Call the factory named by ``spec`` and return the ``nn.Module`` it builds.

    Args:
        spec: ``package.module:factory`` or ``path/to/file.py:factory``.

    Raises:
        UsageError: a malformed spec, a missing module or attribute, or a result that holds
            no ``nn.Module``.
        UserCodeError: importing the module or calling the factory raised.
    """
    from torchdoctor._usercode import TargetNotFound, call_user, load_factory

    location, _, name = spec.rpartition(":")
    if not location or not name.isidentifier():
        raise UsageError(f"--model {spec!r}: {_FORMAT}")
    try:
        factory, _ = load_factory(spec)
    except TargetNotFound as error:
        raise UsageError(_reworded(error, spec, location, name)) from None
    return _model_from(call_user(f"calling {spec}", factory), spec)


def _reworded(error: Any, spec: str, location: str, name: str) -> str:
    """The importer's error in the words of the ``--model`` option."""
    if error.kind == "file":
        return f"--model: no such file {error.subject}"
    if error.kind == "python":
        return f"--model: cannot import {error.subject} as Python"
    if error.kind == "module":
        return (
            f"--model: no module named {error.subject!r} (run from the project root, or "
            "give a file path: path/to/file.py:factory)"
        )
    return f"--model {spec!r}: {location} has no callable {name!r}"


def _model_from(result: Any, spec: str) -> Any:
    import torch

    candidate = result
    if isinstance(result, (tuple, list)) and result:
        candidate = result[0]
    elif isinstance(result, Mapping):
        candidate = result.get("model")
    if not isinstance(candidate, torch.nn.Module):
        raise UsageError(
            f"--model {spec!r} returned {type(result).__name__}; expected an "
            "nn.Module, a tuple starting with one, or a dict with 'model'"
        )
    return candidate
