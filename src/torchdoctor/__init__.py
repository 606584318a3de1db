"""torchdoctor: finds the silent bugs in PyTorch training code.

Three depths over one catalogue of problems and one report:

* :func:`lint` reads source code (never imports or runs it, needs no torch);
* :func:`check` pre-flights a model, a batch, a loss and an optimizer;
* :func:`watch` monitors a real training run.

Everything not listed in ``__all__`` is internal and may change. Importing this package
does not import torch; the functions that need it import it when called. Every error
torchdoctor raises on purpose is a :class:`TorchDoctorError`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from torchdoctor.__about__ import __version__
from torchdoctor.errors import (
    TorchDoctorError,
    TorchMissingError,
    UnknownFormatError,
    UnknownRuleError,
    UsageError,
    UserCodeError,
)
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
from torchdoctor.findings import set_html_renderer as _set_html_renderer
from torchdoctor.rules.registry import RULES, Rule, get_rule

if TYPE_CHECKING:
    from torchdoctor.custom import Detector, Probe
    from torchdoctor.preflight.forecast import ForecastOptions
    from torchdoctor.runtime.watch import Watch
    from torchdoctor.static.config import LintConfig

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
    "UnknownFormatError",
    "UnknownRuleError",
    "UsageError",
    "UserCodeError",
    "__version__",
    "check",
    "get_rule",
    "lint",
    "watch",
]

PathArg = str | os.PathLike[str]


def _notebook_html(report: Report) -> str:
    """Report._repr_html_: the HTML report's notebook page, its renderer loaded on use."""
    from torchdoctor.report.html import notebook_html

    return notebook_html(report)


# The data model cannot import its renderer (the renderer reads the data model), so the
# package, which every import of torchdoctor.findings loads first, hands it over.
_set_html_renderer(_notebook_html)


def lint(
    paths: PathArg | Iterable[PathArg],
    *,
    select: Iterable[str] | None = None,
    ignore: Iterable[str] | None = None,
    config: PathArg | LintConfig | None = None,
    baseline: PathArg | None = None,
    jobs: int | None = None,
    test_code_as_info: bool | None = None,
) -> Report:
    """Read Python files and folders for training bugs; nothing is imported or run.

    Needs no torch. Folders are searched for ``*.py`` files, skipping excluded paths; a
    file named explicitly is always read.

    Args:
        paths: files and folders.
        select: codes or prefixes to report (``["TD2", "TD301"]``); default: the
            config's, else all.
        ignore: codes or prefixes not to report, on top of the config's; the longest
            match wins.
        config: a ``pyproject.toml`` (or TOML file) to read, a
            :class:`~torchdoctor.static.LintConfig`, or ``None`` for the closest
            ``pyproject.toml`` with ``[tool.torchdoctor]``.
        baseline: a JSON report (``--format json``) of known findings; only new ones
            are returned.
        jobs: worker processes (``None``: automatic, ``1``: none).
        test_code_as_info: report the warnings and errors of test code (``tests/``,
            ``conftest.py``, ``test_*.py`` with tests, pytest and unittest modules) as
            info, except TD405 (``None``: the config's ``test-code-as-info``, on by
            default).

    Returns:
        The :class:`Report`; a rule that failed is a ``TD001`` finding, its traceback in
        ``report.facts["internal_errors"]``.

    Raises:
        UsageError: a path does not exist, or the config or baseline is unreadable.
    """
    from torchdoctor.static import lint as lint_paths

    return lint_paths(
        paths,
        select=select,
        ignore=ignore,
        config=config,
        baseline=baseline,
        jobs=jobs,
        test_code_as_info=test_code_as_info,
    )


def check(
    model: Any,
    data: Any,
    loss_fn: Callable[..., Any] | None = None,
    optimizer: Any | None = None,
    *,
    step: Callable[[Any, Any], Any] | None = None,
    device: Any | None = None,
    select: Iterable[str] | None = None,
    ignore: Iterable[str] | None = None,
    seed: int = 0,
    forecast: ForecastOptions | None = None,
    probes: Iterable[Probe] = (),
    timeout: float | None = 60.0,
) -> Report:
    """Pre-flight a training setup (a few probe steps on copies) and report what is wrong.

    The user's model, optimizer, RNGs, flags and modes are left exactly as they were.

    Args:
        model: the ``torch.nn.Module`` to train.
        data: one batch or a DataLoader. With ``loss_fn``: ``(inputs, targets)``,
            ``(x1, ..., xk, targets)``, a dict with ``targets``/``labels``, or extra
            elements the loss requires (``(x, y, weight)``, CTC's four). Without it: a
            dict that goes whole to ``model(**batch)``, whose output has a ``loss``. With
            ``step``: any batch. Full rules: :mod:`torchdoctor.preflight`.
        loss_fn: ``loss_fn(output, targets) -> loss``: an ``nn`` loss module, a
            functional such as ``F.cross_entropy`` or any callable; ``None`` with
            ``step`` or for a model that returns its own loss.
        optimizer: the optimizer that will train ``model``, if already built.
        step: your training step, ``step(model, batch) -> loss`` or ``(loss, outputs)``
            (forward and loss, no ``backward``), the function your loop calls. It runs
            on copies; the forward's output and the loss call are watched through hooks,
            so every probe still applies. Example: ``check(model, loader,
            optimizer=opt, step=lambda m, b: F.cross_entropy(m(b["x"]), b["y"]))``.
        device: where training sends the batches (``"cuda"``); default: the model's.
        select: codes or prefixes to report; default all.
        ignore: codes or prefixes not to report.
        seed: seed for every random draw of the check, so two runs agree.
        forecast: ``torchdoctor.preflight.forecast.ForecastOptions`` to add the
            peak-memory forecast to the facts; the model summary is always there.
        probes: your own probes (:class:`torchdoctor.custom.Probe` instances), run after
            the built-in ones; their findings join the report.
        timeout: wall-clock seconds each probe may take (``None`` or 0: no limit); a probe
            past it ends the check with a ``UserCodeError`` naming what it waited for.

    Returns:
        The :class:`Report` of ``check`` findings, with facts (timings, device, batch).

    Raises:
        UsageError: the arguments cannot be checked.
        UserCodeError: the user's forward, loss or loader raised for a reason no rule
            explains, or memory ran out.
        TorchMissingError: PyTorch is not installed.
    """
    from torchdoctor.preflight import check as check_setup

    return check_setup(
        model,
        data,
        loss_fn,
        optimizer,
        step=step,
        device=device,
        select=select,
        ignore=ignore,
        seed=seed,
        forecast=forecast,
        probes=probes,
        timeout=timeout,
    )


def watch(
    model: Any = None,
    optimizer: Any = None,
    *,
    max_steps: int | None = None,
    sample_every: int | None = None,
    select: Iterable[str] | None = None,
    ignore: Iterable[str] | None = None,
    status_line: bool | None = False,
    localise_non_finite: bool = False,
    status: bool | None = None,
    detectors: Iterable[Detector] = (),
) -> Watch:
    """Watch the training that runs inside the returned context manager::

        with torchdoctor.watch() as w:
            train(model, loader, optimizer)
        print(w.report.findings)

    Args:
        model: a module, or several; ``None`` finds them from the first steps.
        optimizer: an optimizer, or several; ``None`` watches every optimizer.
        max_steps: stop cleanly after this many optimizer steps (the block swallows the
            ``StopTraining`` raised by ``step()``).
        sample_every: full statistics every N steps; ``None``: dense at first, then cheap.
        select: codes or prefixes to report; default all.
        ignore: codes or prefixes not to report.
        status_line: a live status line on standard error: ``True`` always, ``None``
            only on a terminal, ``False`` never.
        localise_non_finite: check every module's output for NaN/Inf from the first
            step (slower) to name the module where it starts.
        status: the former name of ``status_line``; ``True`` means "only on a terminal".
        detectors: your own detectors (:class:`torchdoctor.custom.Detector` instances);
            their findings join the report like the built-in ones.

    Returns:
        A :class:`~torchdoctor.runtime.watch.Watch`; after the block, ``w.report`` is the
        :class:`Report`.

    Raises:
        UsageError: another watch is already active in this process, or a detector is
            not a :class:`torchdoctor.custom.Detector` declaring its rules.
        TorchMissingError: PyTorch is not installed (raised when the block starts).
    """
    from torchdoctor.runtime.watch import watch as watch_training

    return watch_training(
        model,
        optimizer,
        max_steps=max_steps,
        sample_every=sample_every,
        select=select,
        ignore=ignore,
        status_line=status_line,
        localise_non_finite=localise_non_finite,
        status=status,
        detectors=detectors,
        _caller=sys._getframe(1).f_code.co_filename,
    )


def __dir__() -> list[str]:
    return sorted(__all__)
