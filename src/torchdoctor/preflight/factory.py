"""``torchdoctor check TARGET``: find the user's factory, call it, check what it returns.

``TARGET`` is ``pkg.module:factory`` or ``path/to/file.py:factory``; without
``:factory`` the function ``make`` is used. What a factory may return is documented in
:mod:`torchdoctor.preflight` and normalised by :meth:`CheckTarget.from_result`.

:func:`load_factory` is the one importer of user factories: ``torchdoctor ckpt --model``
(:mod:`torchdoctor.ckpt.target`) uses it too, and words its :class:`TargetNotFound`
errors its own way. Nothing here imports torch.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torchdoctor.errors import UsageError
from torchdoctor.findings import Report
from torchdoctor.preflight.failures import call_user, user_code_error

__all__ = ["DEFAULT_FACTORY", "CheckTarget", "TargetNotFound", "check_factory", "load_factory"]

DEFAULT_FACTORY = "make"
_KEYS = ("model", "data", "loss_fn", "optimizer", "device")


@dataclass(frozen=True, slots=True)
class CheckTarget:
    """The objects ``check`` takes, as a factory returned them."""

    model: Any
    data: Any
    loss_fn: Any
    optimizer: Any = None
    device: Any = None

    @classmethod
    def from_result(cls, made: Any, origin: str = "the factory") -> CheckTarget:
        """Normalise a factory's return value: a 3- or 4-tuple, or a dict.

        Raises:
            UsageError: any other shape, naming what was returned.
        """
        if isinstance(made, dict):
            unknown = sorted(set(made) - set(_KEYS))
            missing = [key for key in _KEYS[:3] if key not in made]
            if unknown or missing:
                problems = [f"unknown keys {unknown}"] if unknown else []
                problems += [f"missing keys {missing}"] if missing else []
                raise UsageError(
                    f"{origin} returned a dict with {' and '.join(problems)}; expected keys "
                    f"{', '.join(_KEYS[:3])} and optionally optimizer, device"
                )
            return cls(**made)
        if isinstance(made, (tuple, list)) and len(made) in (3, 4):
            return cls(*made)
        raise UsageError(
            f"{origin} returned {_describe(made)}; expected (model, data, loss_fn), "
            "(model, data, loss_fn, optimizer) or a dict with those keys"
        )

    def check(self, *, select: Iterable[str] | None = None,
              ignore: Iterable[str] | None = None, device: Any = None,
              seed: int = 0) -> Report:
        """Run :func:`torchdoctor.preflight.check` on these objects."""
        from torchdoctor.preflight import check

        return check(self.model, self.data, self.loss_fn, self.optimizer,
                     device=device if device is not None else self.device,
                     select=select, ignore=ignore, seed=seed)


class TargetNotFound(UsageError):
    """The target names something that is not there, or not usable as a factory.

    Attributes:
        kind: what is wrong: ``"file"`` (no such file), ``"python"`` (not importable as
            Python), ``"module"`` (no such module), ``"attribute"`` (the module has no
            such name) or ``"callable"`` (the name is not a function).
        subject: the file, module or ``module:name`` concerned.
    """

    def __init__(self, message: str, kind: str, subject: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.subject = subject


def _describe(value: Any) -> str:
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)} items"
    return f"a {type(value).__name__}"


def _split_target(target: str) -> tuple[str, str]:
    where, sep, name = target.rpartition(":")
    if sep and name.isidentifier() and where:
        return where, name
    return target, DEFAULT_FACTORY


def _import_file(path: Path) -> Any:
    if not path.is_file():
        raise TargetNotFound(f"no such file: {path}", "file", str(path))
    name = "torchdoctor_target_" + re.sub(r"\W", "_", path.stem)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise TargetNotFound(f"cannot import {path}: not a Python file", "python", str(path))
    module = importlib.util.module_from_spec(spec)
    # Let the file import its neighbours, as `python file.py` would.
    sys.path.insert(0, str(path.resolve().parent))
    sys.modules[name] = module
    call_user(f"importing {path}", spec.loader.exec_module, module)
    return module


def _import_module(name: str) -> Any:
    if os.getcwd() not in sys.path:  # as `python -m` does
        sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as error:
        if error.name and (name == error.name or name.startswith(error.name + ".")):
            raise TargetNotFound(f"cannot find module {name!r} (from {os.getcwd()})",
                                 "module", name) from None
        raise user_code_error(f"importing {name}", error) from error
    except Exception as error:  # noqa: BLE001 - the user's module raised at import
        raise user_code_error(f"importing {name}", error) from error


def load_factory(target: str) -> tuple[Callable[[], Any], str]:
    """Import the factory named by ``target``; return it and a display name.

    Raises:
        UsageError: the file, module or function does not exist, or is not callable.
        UserCodeError: importing the user's module raised.
    """
    where, name = _split_target(target)
    is_path = where.endswith(".py") or os.sep in where or "/" in where
    module = _import_file(Path(where)) if is_path else _import_module(where)
    factory = getattr(module, name, None)
    if factory is None:
        raise TargetNotFound(f"{where} has no attribute {name!r}; name the factory as "
                             f"{where}:FUNCTION", "attribute", f"{where}:{name}")
    if not callable(factory):
        raise TargetNotFound(f"{where}:{name} is a {type(factory).__name__}, not a function",
                             "callable", f"{where}:{name}")
    return factory, f"{where}:{name}"


def check_factory(target: str, *, select: Iterable[str] | None = None,
                  ignore: Iterable[str] | None = None, device: Any = None,
                  seed: int = 0) -> Report:
    """Load ``target``'s factory, call it, and check what it returns."""
    factory, label = load_factory(target)
    made = call_user(f"the factory {label}", factory)
    report = CheckTarget.from_result(made, f"the factory {label}").check(
        select=select, ignore=ignore, device=device, seed=seed)
    report.facts["target"] = label
    return report
