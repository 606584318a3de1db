"""Following the processes a watched script starts: each child watches itself.

``torchdoctor run`` watches its own process. A script that trains in other processes
(``torch.multiprocessing.spawn``, ``multiprocessing`` with any start method, a Python
subprocess) would otherwise be reported as "no problems, 0 steps". While a script runs
with :class:`Following`, every child runs a small bootstrap at start-up, the way
coverage.py measures subprocesses:

* the parent puts a private folder holding a ``sitecustomize.py`` first on
  ``PYTHONPATH`` and its options in the ``TORCHDOCTOR_CHILD`` environment variable; a
  fresh interpreter (spawn, forkserver, a subprocess) imports that ``sitecustomize``,
  which chains to any other ``sitecustomize`` on the path and calls :func:`bootstrap`;
* ``multiprocessing``'s ``BaseProcess._bootstrap`` is wrapped (in the parent for fork, in
  the child for the other start methods), so the process's target runs under a monitor of
  its own; DataLoader workers are never watched;
* a plain Python subprocess starts its monitor as soon as it imports torch, and ends it
  at exit.

Each child writes its report as a JSON *part* into the run's folder; the parent merges
the parts (:mod:`torchdoctor.distributed.merge`). Nothing of this runs unless the
environment variable is set, and every failure of ours is swallowed in the child: the
user's process must run exactly as it would without us.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

__all__ = ["ENV", "ChildConfig", "Following", "bootstrap", "write_part"]

ENV = "TORCHDOCTOR_CHILD"
_SITECUSTOMIZE = '''\
"""torchdoctor's child-process bootstrap; chains to any other sitecustomize."""
import os
import sys


def _torchdoctor_chain():
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


try:
    from torchdoctor.runtime.children import bootstrap as _torchdoctor_bootstrap

    _torchdoctor_bootstrap()
except Exception:  # never break the child over torchdoctor
    pass
_torchdoctor_chain()
'''

_LOADER_WORKER_MODULE = "torch.utils.data._utils.worker"
_TORCH_SPAWN_MODULE = "torch.multiprocessing.spawn"


@dataclass(frozen=True, slots=True)
class ChildConfig:
    """What a child needs to watch itself like its parent is watched.

    Attributes:
        parts: the folder where each child writes its report.
        max_steps: ``--max-steps`` of the parent, per child.
        sample_every: ``--sample-every`` of the parent.
        select: ``--select`` codes or prefixes.
        ignore: ``--ignore`` codes or prefixes.
        localise_non_finite: ``--localise-nan``.
        roots: the user's code folders (the parent script's folder).
    """

    parts: str
    max_steps: int | None = None
    sample_every: int | None = None
    select: tuple[str, ...] = ("TD",)
    ignore: tuple[str, ...] = ()
    localise_non_finite: bool = False
    roots: tuple[str, ...] = ()
    script: str | None = None

    def to_env(self) -> str:
        """The value of :data:`ENV`."""
        return json.dumps(asdict(self))

    @classmethod
    def from_env(cls) -> ChildConfig | None:
        """The configuration a parent left in the environment, if any (never raises)."""
        raw = os.environ.get(ENV)
        if not raw:
            return None
        try:
            data = json.loads(raw)
            return cls(
                parts=str(data["parts"]),
                max_steps=data.get("max_steps"),
                sample_every=data.get("sample_every"),
                select=tuple(data.get("select") or ("TD",)),
                ignore=tuple(data.get("ignore") or ()),
                localise_non_finite=bool(data.get("localise_non_finite")),
                roots=tuple(data.get("roots") or ()),
                script=data.get("script"),
            )
        except (ValueError, KeyError, TypeError):
            return None

    def monitor_options(self, roots: tuple[Path, ...] = ()) -> Any:
        """The ``MonitorOptions`` of a child's monitor."""
        from torchdoctor.rules.selection import Selection
        from torchdoctor.runtime.monitor import MonitorOptions

        script = Path(self.script) if self.script else None
        return MonitorOptions(
            command="run",
            max_steps=self.max_steps,
            sample_every=self.sample_every,
            selection=Selection(self.select, self.ignore),
            status=False,
            localise_non_finite=self.localise_non_finite,
            script=script,
            roots=roots or tuple(Path(r) for r in self.roots),
        )


class Following:
    """While active, processes started from this one watch themselves and report here.

    Use as a context manager around the script; afterwards :meth:`parts` lists the
    children's reports. The environment and every patch are restored on exit; the
    folder of parts is removed by :meth:`cleanup`.
    """

    def __init__(self, config: ChildConfig | None = None, *, parts: Path | None = None) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="torchdoctor-run-"))
        self.parts_dir = parts or self.folder / "parts"
        self.parts_dir.mkdir(parents=True, exist_ok=True)
        self._config = config
        self._saved: dict[str, str | None] = {}
        self._patched = False

    def config(self) -> ChildConfig:
        """The configuration handed to children."""
        base = self._config or ChildConfig(parts="")
        return ChildConfig(**{**asdict(base), "parts": str(self.parts_dir)})

    def __enter__(self) -> Following:
        boot = self.folder / "boot"
        boot.mkdir(exist_ok=True)
        (boot / "sitecustomize.py").write_text(_SITECUSTOMIZE, encoding="utf-8")
        for key in (ENV, "PYTHONPATH"):
            self._saved[key] = os.environ.get(key)
        os.environ[ENV] = self.config().to_env()
        os.environ["PYTHONPATH"] = os.pathsep.join(
            [str(boot), *_package_parent(), *filter(None, [self._saved["PYTHONPATH"]])]
        )
        self._patched = install_process_patch()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for key, value in self._saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        if self._patched:
            remove_process_patch()

    def parts(self) -> list[Path]:
        """The part files children wrote, in a stable order."""
        return sorted(self.parts_dir.glob("part-*.json"))

    def cleanup(self) -> None:
        """Remove the folder of parts and the bootstrap."""
        shutil.rmtree(self.folder, ignore_errors=True)


def _package_parent() -> list[str]:
    """The folder that holds the ``torchdoctor`` package, so a child finds it even when
    the parent imported it from a path the child would not search."""
    return [str(Path(__file__).resolve().parents[2])]


# -- the child side --------------------------------------------------------------------


def bootstrap() -> None:
    """Called by the bootstrap ``sitecustomize`` at every child's start-up."""
    config = ChildConfig.from_env()
    if config is None:
        return
    install_process_patch()
    if _watches_itself(list(getattr(sys, "orig_argv", sys.argv))):
        return
    sys.meta_path.insert(0, _WatchOnTorchImport(config))


def _watches_itself(argv: list[str]) -> bool:
    """Whether a child needs no monitor at start-up: a multiprocessing child (its target
    is watched by the process patch) or helper (resource tracker, forkserver), or
    torchdoctor itself (a rank it launched, a nested ``torchdoctor run``)."""
    if any(
        arg.startswith("from multiprocessing") or arg == "--multiprocessing-fork" for arg in argv
    ):
        return True
    if "torchdoctor.distributed.rank" in argv or "torchdoctor.cli" in " ".join(argv):
        return True
    return any(Path(arg).name == "torchdoctor" for arg in argv[:3])


class _WatchOnTorchImport:
    """A meta-path finder that starts the child's monitor once torch is imported."""

    def __init__(self, config: ChildConfig) -> None:
        self.config = config

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "torch":
            return None
        import importlib.machinery

        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        loader = getattr(spec, "loader", None)
        if spec is None or loader is None or not hasattr(loader, "exec_module"):
            return spec
        original = loader.exec_module
        config = self.config

        def exec_module(module: Any) -> None:
            original(module)
            _watch_until_exit(config)

        loader.exec_module = exec_module
        return spec

    def invalidate_caches(self) -> None:
        """Nothing cached."""


def _watch_until_exit(config: ChildConfig) -> None:
    try:
        script = Path(sys.argv[0]).resolve() if sys.argv and sys.argv[0] else None
        roots = (script.parent,) if script is not None and script.is_file() else (Path.cwd(),)
        monitor = _start_monitor(config, roots)
    except Exception:  # noqa: BLE001 - run unwatched rather than break the child
        return
    if monitor is None:
        return

    def finish() -> None:
        _finish(monitor, config, None, 0, None)

    atexit.register(finish)


def _start_monitor(config: ChildConfig, roots: tuple[Path, ...]) -> Any:
    from torchdoctor.runtime import monitor as monitor_module

    for inherited in list(monitor_module._ACTIVE):  # a forked copy of the parent's
        inherited.enabled = False
        inherited._hooks.remove()
        monitor_module._ACTIVE.remove(inherited)
    monitor = monitor_module.Monitor(config.monitor_options(roots))
    monitor.attach()
    return monitor


def _finish(
    monitor: Any, config: ChildConfig, error: BaseException | None, status: int, rank: int | None
) -> None:
    try:
        report = monitor.finish(error)
        report.exit_status = status
        write_part(Path(config.parts), report, rank)
    except Exception:  # noqa: BLE001 - the child's own outcome matters more
        return


def write_part(folder: Path, report: Any, rank: int | None, label: str = "") -> Path:
    """Write one process's report where the merging process will find it."""
    from torchdoctor.report.json import report_to_dict

    facts = report.facts
    if rank is None:
        rank = _int_or_none(facts.get("rank"))
    if rank is None:
        rank = _int_or_none(os.environ.get("RANK"))
    meta = {
        "pid": os.getpid(),
        "rank": rank,
        "label": label,
        "world_size": _int_or_none(facts.get("world_size"))
        or _int_or_none(os.environ.get("WORLD_SIZE")),
    }
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"part-{os.getpid()}.json"
    temporary = target.with_suffix(".tmp")
    temporary.write_text(
        json.dumps({"meta": meta, "report": report_to_dict(report)}, allow_nan=False),
        encoding="utf-8",
    )
    temporary.replace(target)
    return target


def _int_or_none(value: Any) -> int | None:
    try:
        return None if value is None else int(value)
    except (TypeError, ValueError):
        return None


# -- multiprocessing -------------------------------------------------------------------

_ORIGINAL_BOOTSTRAP: list[Callable[..., Any]] = []


def install_process_patch() -> bool:
    """Wrap ``multiprocessing``'s process start-up; ``False`` when already wrapped."""
    from multiprocessing import process

    if _ORIGINAL_BOOTSTRAP:
        return False
    original = process.BaseProcess._bootstrap  # type: ignore[attr-defined]
    _ORIGINAL_BOOTSTRAP.append(original)

    def _bootstrap(self: Any, *args: Any, **kwargs: Any) -> Any:
        _watch_target(self)
        return original(self, *args, **kwargs)

    process.BaseProcess._bootstrap = _bootstrap  # type: ignore[attr-defined]
    return True


def remove_process_patch() -> None:
    """Undo :func:`install_process_patch`."""
    from multiprocessing import process

    if _ORIGINAL_BOOTSTRAP:
        process.BaseProcess._bootstrap = _ORIGINAL_BOOTSTRAP.pop()  # type: ignore[attr-defined]


def _watch_target(process: Any) -> None:
    """In a just-started child: run its target under a monitor, unless it is a
    DataLoader worker or the run is not being followed."""
    try:
        config = ChildConfig.from_env()
        target = getattr(process, "_target", None)
        if config is None or target is None:
            return
        module = getattr(target, "__module__", "") or ""
        if module.startswith(_LOADER_WORKER_MODULE):
            return
        args = tuple(getattr(process, "_args", ()))
        if module == _TORCH_SPAWN_MODULE and len(args) >= 2 and callable(args[0]):
            # torch.multiprocessing.spawn: _wrap(fn, i, args, error_file) catches fn's
            # exception itself, so the user's fn is what gets watched.
            process._args = (_Watched(args[0], config, _int_or_none(args[1])), *args[1:])
        else:
            process._target = _Watched(target, config, None)
    except Exception:  # noqa: BLE001
        return


class _Watched:
    """A child's target, run under a monitor whose report becomes a part file."""

    def __init__(self, function: Callable[..., Any], config: ChildConfig, rank: int | None) -> None:
        self.function = function
        self.config = config
        self.rank = rank

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        roots = _roots_of(self.function) or tuple(Path(r) for r in self.config.roots)
        try:
            monitor = _start_monitor(self.config, roots)
        except Exception:  # noqa: BLE001 - run unwatched
            monitor = None
        if monitor is None:
            return self.function(*args, **kwargs)
        from torchdoctor.runtime.stop import StopTraining

        try:
            result = self.function(*args, **kwargs)
        except StopTraining:
            _finish(monitor, self.config, None, 0, self.rank)
            return None
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
            _finish(monitor, self.config, None, code, self.rank)
            raise
        except BaseException as error:
            _finish(monitor, self.config, error, 1, self.rank)
            raise
        _finish(monitor, self.config, None, 0, self.rank)
        return result


def _roots_of(function: Callable[..., Any]) -> tuple[Path, ...]:
    code = getattr(getattr(function, "__func__", function), "__code__", None)
    if code is None or code.co_filename.startswith("<"):
        return ()
    return (Path(code.co_filename).resolve().parent,)
