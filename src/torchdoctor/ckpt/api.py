"""``torchdoctor ckpt`` as a Python API: inspect, compare, remap and diff checkpoints."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, cast

from torchdoctor.__about__ import __version__
from torchdoctor._kernel import Reporter, run_detector
from torchdoctor.ckpt.compare import Comparison, compare, model_entries
from torchdoctor.ckpt.contents import CheckpointContents, LiveTensors, describe_live
from torchdoctor.ckpt.detectors import CheckpointContext
from torchdoctor.ckpt.diff import diff_contents
from torchdoctor.ckpt.facts import comparison_facts, contents_facts, diff_facts
from torchdoctor.ckpt.loading import LoadedCheckpoint, load_checkpoint
from torchdoctor.errors import UsageError
from torchdoctor.findings import Depth, Finding, Report
from torchdoctor.rules.detectors import registered_detectors
from torchdoctor.rules.selection import Selection

__all__ = ["diagnose", "inspect_checkpoint"]


@dataclass(frozen=True, slots=True)
class _Opened:
    loaded: LoadedCheckpoint
    contents: CheckpointContents
    live: LiveTensors


def _open(path: str | Path, trust: bool) -> _Opened:
    loaded = load_checkpoint(path, trust=trust)
    contents, live = describe_live(loaded)
    return _Opened(loaded, contents, live)


def inspect_checkpoint(path: str | Path, *, trust: bool = False) -> CheckpointContents:
    """Describe what a checkpoint holds, loading it with ``weights_only=True``.

    Raises:
        UsageError: the file is missing, empty, a directory, truncated or not a checkpoint.
    """
    return _open(path, trust).contents


def diagnose(
    path: str | Path,
    *,
    model: Any = None,
    trust: bool = False,
    write_remapped: str | Path | None = None,
    diff: str | Path | None = None,
    select: Iterable[str] | None = None,
    ignore: Iterable[str] | None = None,
) -> Report:
    """Inspect a checkpoint and report its problems; optionally compare, remap and diff.

    Args:
        path: the checkpoint (torch ``.pt``/``.pth``, zip or legacy, or ``.safetensors``).
        model: an ``nn.Module`` to compare the checkpoint's weights with.
        trust: load with ``weights_only=False``. Only for files from a trusted source:
            unpickling runs whatever code the file names.
        write_remapped: write a copy whose keys are renamed to fit ``model`` here; needs
            ``model``. Written only when the copy loads with ``strict=True``.
        diff: a second checkpoint to compare with, key by key.
        select: rule codes or prefixes to report (``["TD91"]``); default all.
        ignore: rule codes or prefixes not to report; the longest match wins.

    Returns:
        The report; ``facts["checkpoint"]`` describes the file, ``facts["comparison"]``,
        ``facts["diff"]`` and ``facts["remapped"]`` appear when asked for.

    Raises:
        UsageError: bad input (missing, empty, truncated or foreign file), a checkpoint that
            is not of ``model``'s architecture at all, or a remap that cannot fit.
    """
    if write_remapped is not None and model is None:
        raise UsageError("--write-remapped needs --model: the mapping is proposed against it")
    selection = Selection.from_options(select, ignore)
    opened = _open(path, trust)
    report = Report(
        tool_version=__version__,
        command="ckpt",
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )
    report.facts["checkpoint"] = contents_facts(opened.contents)
    # A refused file has no loaded weights to compare; TD902 already says why.
    comparable = model is not None and opened.contents.kind != "refused"
    comparison = _compare(opened, model) if comparable else None
    if comparison is not None:
        report.facts["comparison"] = comparison_facts(comparison)
    report.extend(_run_detectors(CheckpointContext(opened.contents, comparison), selection))
    if diff is not None:
        _add_diff(report, opened, _open(diff, trust), selection)
    if write_remapped is not None:
        from torchdoctor.ckpt.remap import write_remapped as write

        if comparison is None:
            raise UsageError(
                f"{path} was not loaded (it needs arbitrary unpickling, see "
                "TD902), so no remapped copy was written"
            )
        out = Path(write_remapped)
        write(opened.loaded, opened.contents, opened.live, comparison, model_entries(model), out)
        report.facts["remapped"] = str(out)
    return report


def _compare(opened: _Opened, model: Any) -> Comparison:
    entries = model_entries(model)
    primary = opened.contents.primary
    name = type(model).__name__
    if primary is None:
        raise UsageError(f"{opened.loaded.path} holds no state_dict to compare with {name}")
    comparison = compare(primary, entries, name)
    matched = comparison.matched_after_mapping
    used = len(primary.tensors) - len(comparison.remaining_unexpected)
    if 2 * matched < len(entries) and 2 * used < len(primary.tensors):
        raise UsageError(
            f"{opened.loaded.path} is not a checkpoint of {name}: only {matched} of the "
            f"model's {len(entries)} tensors are found in it (by name and shape, after "
            f"trying key renames), and {len(primary.tensors) - used} of its "
            f"{len(primary.tensors)} tensors have no place in the model"
        )
    return comparison


def _add_diff(report: Report, first: _Opened, second: _Opened, selection: Selection) -> None:
    for side in (first, second):
        if side.contents.kind == "refused":
            raise UsageError(
                f"cannot diff: {side.loaded.path} was not loaded (it needs "
                "arbitrary unpickling, see TD902); pass --trust only if you "
                "trust its source"
            )
    difference = diff_contents(first.contents, first.live, second.contents, second.live)
    report.facts["diff"] = diff_facts(first.contents.path, second.contents.path, difference)
    report.facts["other_checkpoint"] = contents_facts(second.contents)
    report.extend(_run_detectors(CheckpointContext(second.contents), selection))


def _run_detectors(context: CheckpointContext, selection: Selection) -> list[Finding]:
    found: list[Finding] = []
    for info in registered_detectors(Depth.CKPT):
        function = cast(Callable[[Any, Reporter], None], info.target)
        found.extend(
            run_detector(
                f"ckpt detector {info.name}",
                info.codes,
                functools.partial(function, context),
                Depth.CKPT,
                context.at(),
                selection,
            )
        )
    return found
