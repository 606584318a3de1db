"""Running a training script (or ``-m`` module) exactly as ``python`` would, watched.

The script runs in this process as ``__main__`` through :mod:`runpy`, with ``sys.argv``
and ``sys.path[0]`` set as the interpreter sets them, so ``if __name__ == "__main__":``
guards, relative imports of sibling files, and DataLoader workers (fork, and spawn, which
re-imports ``__main__`` from its file or module name) behave as they do without us.
Whatever way the script ends (normally, ``sys.exit(n)``, an exception, Ctrl-C, or
``--max-steps``), the monitor is detached and the report is built; the script's own exit
status is kept in :attr:`ScriptResult.exit_status`.
"""

from __future__ import annotations

import runpy
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

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
    """

    report: Report
    exit_status: int
    stopped_early: bool

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


def run_script(target: str, args: list[str] | tuple[str, ...] = (), *, module: bool = False,
               max_steps: int | None = None, sample_every: int | None = None,
               selection: Selection | None = None, status: bool | None = None,
               localise_non_finite: bool = False) -> ScriptResult:
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
        result = _run(target, script, module, MonitorOptions(
            command="run", max_steps=max_steps, sample_every=sample_every,
            selection=selection or Selection(), status=status, script=script,
            localise_non_finite=localise_non_finite,
            roots=(script.parent,) if script is not None and not module else (Path.cwd(),)))
    finally:
        sys.argv = saved_argv
        _set_path0(saved_path0)
    return result


def _run(target: str, script: Path | None, module: bool, options: MonitorOptions
         ) -> ScriptResult:
    monitor = Monitor(options)
    monitor.attach()
    exit_status, stopped = 0, False
    error: BaseException | None = None
    try:
        if module:
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(str(script), run_name="__main__")
    except StopTraining:
        stopped = True
    except SystemExit as exit_:
        exit_status = _exit_status(exit_)
    except KeyboardInterrupt as interrupt:
        error, exit_status = interrupt, 130
        _print_traceback(interrupt, script)
    except BaseException as raised:  # noqa: BLE001 - the script's failure is data
        error, exit_status = raised, 1
        _print_traceback(raised, script)
    finally:
        sys.stdout.flush()
        report = monitor.finish(error)
    report.exit_status = exit_status
    return ScriptResult(report, exit_status, stopped)


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
    while tb is not None and tb.tb_frame.f_code.co_filename.startswith(_OWN_FILES) and (
            tb.tb_frame.f_code.co_filename != own):
        tb = tb.tb_next
    traceback.print_exception(type(error), error, tb, file=sys.stderr)
    sys.stderr.flush()
