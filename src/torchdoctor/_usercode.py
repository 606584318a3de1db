"""The one notion of user code: which files are the user's, and how their code is called.

Every depth that points at the user's lines asks here, so ``check``, ``run``, ``ckpt`` and
the exception and warning explainers place one problem on the same line:

* **Which files are the user's** (:func:`is_user_file`): every file except the standard
  library, installed packages (``site-packages``, ``dist-packages``, the user scheme),
  console-script launchers (``.venv/bin/torchdoctor``), torch and torchdoctor, and
  pseudo-files (``<string>``, ``<frozen runpy>``). A script that ``torchdoctor run``
  executes is the user's wherever it lives (the bundled demo lives in torchdoctor's own
  package): :func:`add_run_script` records it in the one registry of run scripts.
* **The user's frame** of a stack or traceback (:func:`user_frame_summary`).
* **Calling user code** (:func:`call_user`): its exceptions become
  :class:`~torchdoctor.errors.UserCodeError` naming the stage and the user's line.
* **Loading a user factory** (:func:`load_factory`) from ``pkg.module:factory`` or
  ``path/to/file.py:factory``: what ``check`` and ``ckpt --model`` take.

Nothing here imports torch: it is looked up in :data:`sys.modules`, where it is whenever
there is a torch frame to classify.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
import re
import runpy
import sys
import sysconfig
import traceback
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from torchdoctor.errors import UsageError, UserCodeError
from torchdoctor.findings import Location

__all__ = [
    "DEFAULT_FACTORY",
    "RUNPY_FILES",
    "TargetNotFound",
    "add_run_script",
    "call_user",
    "error_location",
    "is_library_file",
    "is_out_of_memory",
    "is_run_script",
    "is_torch_file",
    "is_torchdoctor_file",
    "is_user_file",
    "library_dirs",
    "load_factory",
    "registered_run_script",
    "remove_run_script",
    "under",
    "user_code_error",
    "user_frame_summary",
]

T = TypeVar("T")

_TORCHDOCTOR_DIR = os.path.realpath(str(Path(__file__).resolve().parent))
# Frames of runpy mark where a launcher started the user's code (frozen on Python >= 3.11).
RUNPY_FILES = frozenset({runpy.__file__, "<frozen runpy>"})


# --- which files are the user's ----------------------------------------------------------


@functools.cache
def library_dirs() -> tuple[str, ...]:
    """Directories whose files are never the user's: the standard library, installed
    packages (the user scheme's too), console-script launchers (``.venv/bin``) and
    torchdoctor. torch is added when it is imported."""
    roots = {os.path.realpath(os.path.dirname(os.__file__)), _TORCHDOCTOR_DIR}
    schemes = [sysconfig.get_paths()]
    user_scheme = f"{os.name}_user"
    if user_scheme in sysconfig.get_scheme_names():
        schemes.append(sysconfig.get_paths(user_scheme))
    for paths in schemes:
        for key in ("stdlib", "platstdlib", "purelib", "platlib", "scripts"):
            value = paths.get(key)
            if value:
                roots.add(os.path.realpath(value))
    return tuple(sorted(roots))


# The one registry of scripts that `torchdoctor run` is executing: the user's even where
# they live among library files.
_RUN_SCRIPTS: set[str] = set()


def add_run_script(path: str | os.PathLike[str]) -> None:
    """Count ``path`` as user code until :func:`remove_run_script`."""
    _RUN_SCRIPTS.add(os.path.realpath(path))


def remove_run_script(path: str | os.PathLike[str]) -> None:
    """Stop counting ``path`` as a run script."""
    _RUN_SCRIPTS.discard(os.path.realpath(path))


@contextmanager
def registered_run_script(path: str | os.PathLike[str]) -> Iterator[None]:
    """``path`` is a run script inside the ``with`` block."""
    add_run_script(path)
    try:
        yield
    finally:
        remove_run_script(path)


def is_run_script(path: str, scripts: Collection[str] = ()) -> bool:
    """Whether ``path`` is a script ``torchdoctor run`` is executing: in the registry, or
    among ``scripts`` (real paths: a monitor's own run script, before it registers it)."""
    if not path or not (_RUN_SCRIPTS or scripts):
        return False
    real = os.path.realpath(path)
    return real in _RUN_SCRIPTS or real in scripts


def is_library_file(path: str, scripts: Collection[str] = ()) -> bool:
    """True for files that are not the user's (see the module doc); never for a run
    script (see :func:`is_run_script`). Pseudo-files such as ``<frozen runpy>`` or
    ``<string>`` count as library."""
    if is_run_script(path, scripts):
        return False
    return _is_library_path(path)


def is_user_file(path: str, scripts: Collection[str] = ()) -> bool:
    """Whether ``path`` (as in ``code.co_filename``) is the user's code."""
    return not is_library_file(path, scripts)


@functools.cache
def _is_library_path(path: str) -> bool:
    if not path or path.startswith("<"):
        return True
    real = os.path.realpath(path)
    parts = Path(real).parts
    if "site-packages" in parts or "dist-packages" in parts:
        return True
    roots = library_dirs()
    torch_file = getattr(sys.modules.get("torch"), "__file__", None)
    if torch_file:
        roots = (*roots, os.path.realpath(os.path.dirname(torch_file)))
    return any(real == root or real.startswith(root + os.sep) for root in roots)


def is_torch_file(path: str) -> bool:
    """True for a file inside the imported torch package."""
    torch_file = getattr(sys.modules.get("torch"), "__file__", None)
    if not torch_file or not path or path.startswith("<"):
        return False
    return under(path, [os.path.dirname(torch_file)])


def is_torchdoctor_file(path: str) -> bool:
    """True for a file of torchdoctor itself."""
    return bool(path) and under(path, [_TORCHDOCTOR_DIR])


def under(path: str, roots: Sequence[str]) -> bool:
    """Whether ``path`` lies in one of the directories ``roots`` (symlinks resolved)."""
    real = os.path.realpath(path)
    return any(
        real == r or real.startswith(r.rstrip(os.sep) + os.sep)
        for r in (os.path.realpath(root) for root in roots)
    )


def user_frame_summary(
    frames: Sequence[traceback.FrameSummary], *, inside_model: bool = False
) -> traceback.FrameSummary | None:
    """The innermost frame of the user's code among ``frames`` (outermost first).

    Frames above a runpy launcher are never the user's. With ``inside_model``, only frames
    below the first ``nn.Module`` call count: a full stack also holds the callers of the
    model (a test runner, a CLI), which are not where a value was computed.
    """
    launchers = [i for i, f in enumerate(frames) if f.filename in RUNPY_FILES]
    if launchers:
        frames = frames[launchers[-1] + 1 :]
    if inside_model:
        calls = [
            i
            for i, f in enumerate(frames)
            if f.filename.replace(os.sep, "/").endswith("torch/nn/modules/module.py")
        ]
        frames = frames[calls[0] + 1 :] if calls else frames
    for frame in reversed(frames):
        if is_user_file(frame.filename):
            return frame
    return None


# --- calling user code -------------------------------------------------------------------


def error_location(error: BaseException, module_path: str | None = None) -> Location:
    """Where ``error`` was raised in the user's code, plus the module that was running."""
    frame = user_frame_summary(traceback.extract_tb(error.__traceback__))
    if frame is None:
        return Location(object=module_path or None)
    return Location(
        path=frame.filename,
        line=frame.lineno,
        object=module_path or None,
        snippet=(frame.line or None),
    )


def is_out_of_memory(error: BaseException) -> bool:
    """Whether ``error`` is a host or device out-of-memory error."""
    if isinstance(error, MemoryError):
        return True
    return type(error).__name__ == "OutOfMemoryError" or "out of memory" in str(error)


def user_code_error(
    stage: str, error: BaseException, module_path: str | None = None
) -> UserCodeError:
    """A :class:`UserCodeError` saying which stage failed, how, and at which user line."""
    location = error_location(error, module_path)
    where = f"{location.path}:{location.line}" if location.path else None
    detail = f"{type(error).__name__}: {error}".strip()
    if len(detail) > 400:
        detail = detail[:400] + "..."
    parts = [f"{stage} raised {detail}"]
    if where:
        parts.append(f"at {where}")
    if module_path:
        parts.append(f"(in module `{module_path}`)")
    message = " ".join(parts)
    if is_out_of_memory(error):
        message = (
            f"{stage} ran out of memory ({detail}); retry with a smaller batch or "
            "model, or on a device with more memory"
        )
    return UserCodeError(message, original=error, where=where)


def call_user(stage: str, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Call user code; its exceptions become :class:`UserCodeError` naming ``stage``.

    ``KeyboardInterrupt`` passes through untouched so Ctrl-C stops the command, and so does
    an exception of ours marked ``torchdoctor_passthrough`` (a check probe's timeout). Any
    other ``BaseException`` (a user's own subclass) is the user's error, like an exception.
    """
    try:
        return function(*args, **kwargs)
    except (UserCodeError, KeyboardInterrupt, GeneratorExit):
        raise
    except BaseException as error:  # noqa: BLE001 - whatever the user's code raises
        if getattr(error, "torchdoctor_passthrough", False):
            raise
        raise user_code_error(stage, error) from error


# --- loading a user factory --------------------------------------------------------------

DEFAULT_FACTORY = "make"


class TargetNotFound(UsageError):  # noqa: N818 - a usage error, named for what it says
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
            raise TargetNotFound(
                f"cannot find module {name!r} (from {os.getcwd()})", "module", name
            ) from None
        raise user_code_error(f"importing {name}", error) from error
    except Exception as error:  # noqa: BLE001 - the user's module raised at import
        raise user_code_error(f"importing {name}", error) from error


def load_factory(target: str) -> tuple[Callable[[], Any], str]:
    """Import the factory named by ``target``; return it and a display name.

    ``target`` is ``pkg.module:factory`` or ``path/to/file.py:factory``; without
    ``:factory``, the function ``make``.

    Raises:
        TargetNotFound: the file, module or function does not exist, or is not callable
            (a :class:`~torchdoctor.errors.UsageError`).
        UserCodeError: importing the user's module raised.
    """
    where, name = _split_target(target)
    is_path = where.endswith(".py") or os.sep in where or "/" in where
    module = _import_file(Path(where)) if is_path else _import_module(where)
    factory = getattr(module, name, None)
    if factory is None:
        raise TargetNotFound(
            f"{where} has no attribute {name!r}; name the factory as {where}:FUNCTION",
            "attribute",
            f"{where}:{name}",
        )
    if not callable(factory):
        raise TargetNotFound(
            f"{where}:{name} is a {type(factory).__name__}, not a function",
            "callable",
            f"{where}:{name}",
        )
    return factory, f"{where}:{name}"
