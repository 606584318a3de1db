"""Running a training script (or ``-m`` module) exactly as ``python`` would, watched.

The script runs in this process as ``__main__`` through :mod:`runpy`, with ``sys.argv``
and ``sys.path[0]`` set as the interpreter sets them, so ``if __name__ == "__main__":``
guards, relative imports of sibling files, and DataLoader workers (fork, and spawn, which
re-imports ``__main__`` from its file or module name) behave as they do without us.
Whatever way the script ends (normally, ``sys.exit(n)``, an exception, Ctrl-C, or
``--max-steps``), the monitor is detached and the report is built; the script's own exit
status is kept in :attr:`ScriptResult.exit_status`.

Two ends skip Python's unwinding: a terminating signal (SIGTERM from SLURM, Kubernetes or
``timeout``; SIGHUP) and ``os._exit``. For a signal whose handler is still the default, ours
builds the report, hands it to ``on_signal`` (the CLI prints it and writes ``--report``),
then restores the default and sends the signal again, so the process ends as it would
have. ``os._exit`` in the run's own process first hands the report so far to ``progress``.
"""

from __future__ import annotations

import contextlib
import os
import runpy
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torchdoctor.errors import UsageError
from torchdoctor.findings import INTERNAL_ERROR_CODE, Report, Severity
from torchdoctor.rules.selection import Selection
from torchdoctor.runtime.monitor import Monitor, MonitorOptions, StopTraining

__all__ = ["ScriptResult", "run_script"]

# Frames to drop from the top of a script's traceback: ours and runpy's ("<frozen runpy>"
# on Python >= 3.11).
_OWN_FILES = (str(Path(__file__).resolve().parents[1]), runpy.__file__, "<frozen runpy>")


@dataclass(frozen=True, slots=True)
class ScriptResult:
    """How a watched script ended.

    Attributes:
        report: the findings and facts of the run.
        exit_status: what ``python script.py`` would have exited with (130 for Ctrl-C).
        stopped_early: ``--max-steps`` ended the run.
        signal: the signal that ended the script (SIGINT for Ctrl-C), if one did: the
            CLI ends by the same signal, as ``python`` would.
    """

    report: Report
    exit_status: int
    stopped_early: bool
    signal: int | None = None

    def exit_code(self, fail_on: Severity | None = None) -> int:
        """The status ``torchdoctor run`` exits with.

        The script's own failure passes through. When the script succeeded, a finding at or
        above ``fail_on`` gives 1 (torchdoctor's own ``TD001`` never does); ``None`` never
        fails on findings.
        """
        if self.exit_status != 0 or fail_on is None:
            return self.exit_status
        worst = [f.severity for f in self.report.findings if f.code != INTERNAL_ERROR_CODE]
        return 1 if worst and max(worst) >= fail_on else 0


def run_script(
    target: str,
    args: list[str] | tuple[str, ...] = (),
    *,
    module: bool = False,
    max_steps: int | None = None,
    sample_every: int | None = None,
    selection: Selection | None = None,
    status: bool | None = None,
    localise_non_finite: bool = False,
    progress: Callable[[Report], None] | None = None,
    on_signal: Callable[[ScriptResult], None] | None = None,
) -> ScriptResult:
    """Run ``target`` (a path, or a module name with ``module=True``) under the monitor.

    Args:
        target: the script's path, or a dotted module name.
        args: the script's own arguments, forwarded untouched.
        module: run ``target`` like ``python -m target``.
        max_steps: stop cleanly after this many optimizer steps.
        sample_every: full statistics every N steps (default: automatic).
        selection: which rules to report.
        status: live status line (``None``: when standard error is a terminal).
        localise_non_finite: check every module's output for NaN/Inf from the first step.
        progress: called with the report so far at sampled steps when findings changed,
            and before ``os._exit`` (keeps a ``--report`` file current).
        on_signal: called with the result when SIGTERM or SIGHUP ends the script, just
            before the process ends by that signal.

    Raises:
        UsageError: the script does not exist, or the module cannot be found.
    """
    saved_argv, saved_path0 = sys.argv[:], sys.path[0] if sys.path else None
    try:
        _set_path0(str(Path.cwd()))  # so that `-m` finds modules next to the user
        script = _resolve(target, module)
        if not module and script is not None:
            _set_path0(str(script.parent))
        sys.argv = [target, *args]
        result = _run(
            target,
            script,
            module,
            MonitorOptions(
                command="run",
                max_steps=max_steps,
                sample_every=sample_every,
                selection=selection or Selection(),
                status=status,
                script=script,
                localise_non_finite=localise_non_finite,
                progress=progress,
                roots=(script.parent,) if script is not None and not module else (Path.cwd(),),
            ),
            on_signal,
        )
    finally:
        sys.argv = saved_argv
        _set_path0(saved_path0)
    return result


def _run(
    target: str,
    script: Path | None,
    module: bool,
    options: MonitorOptions,
    on_signal: Callable[[ScriptResult], None] | None = None,
) -> ScriptResult:
    monitor = Monitor(options)
    monitor.attach()
    exit_status, stopped = 0, False
    signalled: int | None = None
    error: BaseException | None = None
    ends = _Ends(monitor, on_signal)
    ends.install()
    try:
        if module:
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            with _argv0_as_given(target):
                runpy.run_path(str(script), run_name="__main__")
    except StopTraining:
        stopped = True
    except SystemExit as exit_:
        exit_status = _exit_status(exit_)
    except KeyboardInterrupt as interrupt:
        error, exit_status, signalled = interrupt, 130, int(signal.SIGINT)
        _print_traceback(interrupt, script)
    except BaseException as raised:  # noqa: BLE001 - the script's failure is data
        error, exit_status = raised, 1
        _print_traceback(raised, script)
    finally:
        ends.remove()
        sys.stdout.flush()
        report = monitor.finish(error)
    report.exit_status = exit_status
    if signalled is not None:
        report.facts["ended_by_signal"] = signal.Signals(signalled).name
    return ScriptResult(report, exit_status, stopped, signalled)


_TERMINATING = ("SIGTERM", "SIGHUP")
_os_exit = os._exit  # the real one, whoever patches it later


class _Ends:
    """The handlers for the ends that skip Python's unwinding: terminating signals whose
    handler is still the default, and ``os._exit``. Installed in the run's own process
    only; in a forked child they act as if they were not there."""

    def __init__(self, monitor: Monitor, on_signal: Callable[[ScriptResult], None] | None) -> None:
        self._monitor = monitor
        self._on_signal = on_signal
        self._pid = os.getpid()
        self._handlers: dict[int, Any] = {}
        self._exit: Any = None
        self._original_exit: Any = None

    def install(self) -> None:
        if threading.current_thread() is threading.main_thread():
            for name in _TERMINATING:
                number = getattr(signal, name, None)
                try:
                    if number is not None and signal.getsignal(number) == signal.SIG_DFL:
                        signal.signal(number, self._signalled)
                        self._handlers[int(number)] = self._signalled
                except (OSError, ValueError):  # not settable here
                    continue
        if self._monitor.options.progress is not None:
            original = self._original_exit = os._exit

            def _exit(status: int) -> None:
                if os.getpid() == self._pid:
                    self._progress(status)
                original(status)

            self._exit = os._exit = _exit  # type: ignore[assignment]

    def remove(self) -> None:
        for number, ours in self._handlers.items():
            try:
                if signal.getsignal(number) is ours:  # the script's own handler stays
                    signal.signal(number, signal.SIG_DFL)
            except (OSError, ValueError):
                continue
        self._handlers.clear()
        if self._exit is not None and os._exit is self._exit:
            os._exit = self._original_exit
        self._exit = None

    def _progress(self, status: int) -> None:
        progress = self._monitor.options.progress
        try:
            if progress is not None:
                report = self._monitor.finish(None)
                report.exit_status = status
                progress(report)
        except Exception:  # noqa: BLE001, S110 - the process is ending either way
            pass

    def _signalled(self, number: int, frame: Any) -> None:
        if os.getpid() == self._pid:
            try:
                sys.stdout.flush()
                report = self._monitor.finish(None)
                report.exit_status = 128 + number
                report.facts["ended_by_signal"] = signal.Signals(number).name
                if self._on_signal is not None:
                    self._on_signal(ScriptResult(report, 128 + number, False, number))
                sys.stdout.flush()
                sys.stderr.flush()
            except Exception:  # noqa: BLE001, S110 - the process ends by the signal anyway
                pass
        die_by(number)


def die_by(number: int) -> None:
    """End this process by signal ``number`` with its default action, as an unhandled
    signal would; ``128 + number`` if the signal does not end it."""
    try:
        signal.signal(number, signal.SIG_DFL)  # for SIGINT: not Python's handler
        os.kill(os.getpid(), number)
    except (OSError, ValueError):
        pass
    _os_exit(128 + number)


@contextlib.contextmanager
def _argv0_as_given(target: str) -> Iterator[None]:
    """``runpy.run_path`` sets ``sys.argv[0]`` to the path it runs (absolute here, so that
    ``__file__`` is absolute as ``python`` makes it); ``python`` keeps it as typed, which
    argparse shows in usage lines. Its argv helper is swapped for one that keeps ours."""
    original = getattr(runpy, "_ModifiedArgv0", None)
    if original is None:
        yield
        return

    class _Argv0(original):  # type: ignore[misc, valid-type]
        def __init__(self, value: Any) -> None:
            super().__init__(target)

    setattr(runpy, "_ModifiedArgv0", _Argv0)  # noqa: B010 - a private name
    try:
        yield
    finally:
        setattr(runpy, "_ModifiedArgv0", original)  # noqa: B010


def _resolve(target: str, module: bool) -> Path | None:
    if module:
        import importlib.util

        try:
            spec = importlib.util.find_spec(target)
        except (ImportError, ValueError) as error:
            raise UsageError(f"cannot run module {target!r}: {error}") from None
        if spec is None:
            raise UsageError(f"no module named {target!r}")
        origin = spec.origin if spec.origin not in (None, "namespace") else None
        return Path(origin).resolve() if origin else None
    path = Path(target)
    if not path.exists():
        raise UsageError(f"no such script: {target}")
    return path.resolve()


def _set_path0(value: str | None) -> None:
    if value is None:
        return
    if sys.path:
        sys.path[0] = value
    else:
        sys.path.insert(0, value)


def _exit_status(exit_: SystemExit) -> int:
    """The status ``python`` exits with for ``sys.exit(code)``."""
    code = exit_.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF if code >= 0 else code % 256
    print(code, file=sys.stderr)
    return 1


def _print_traceback(error: BaseException, script: Path | None) -> None:
    """Print the traceback as Python would, without torchdoctor's and runpy's frames
    (the script's own frames stay, even when it lives inside torchdoctor: the demo)."""
    tb = error.__traceback__
    own = str(script) if script is not None else None
    while (
        tb is not None
        and tb.tb_frame.f_code.co_filename.startswith(_OWN_FILES)
        and (tb.tb_frame.f_code.co_filename != own)
    ):
        tb = tb.tb_next
    traceback.print_exception(type(error), error, tb, file=sys.stderr)
    sys.stderr.flush()
