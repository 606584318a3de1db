"""Plain-text summary of a ckpt report's facts: what the file holds, fit, diff.

Printed above the findings by ``torchdoctor ckpt``. It reads only ``Report.facts`` (the
same data the JSON output carries), does no I/O and imports no torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torchdoctor import facts as declared
from torchdoctor.ckpt.detectors import human_bytes

__all__ = ["render_ckpt_summary"]

_DIFF_ROWS = 200


def render_ckpt_summary(facts: Mapping[str, Any]) -> str:
    """The summary text for the facts of :func:`torchdoctor.ckpt.diagnose`."""
    lines: list[str] = []
    contents = declared.CHECKPOINT.get(facts)
    if contents is not None:
        lines += _contents(contents)
    comparison = declared.COMPARISON.get(facts)
    if comparison is not None:
        lines += _comparison(comparison)
    diff = declared.DIFF.get(facts)
    if diff is not None:
        lines += _diff(diff)
    remapped = declared.REMAPPED.get(facts)
    if remapped is not None:
        lines.append(f"Wrote the remapped checkpoint to {remapped}.")
    return "\n".join(lines) + "\n\n" if lines else ""


def _counts(counter: Mapping[str, int]) -> str:
    return ", ".join(f"{name} x{count}" for name, count in counter.items()) or "none"


def _contents(info: Mapping[str, Any]) -> list[str]:
    mapped = ", memory-mapped" if info["mmap"] else ""
    lines = [
        f"{info['path']}  ({info['format']}, {human_bytes(info['file_size'])} on disk{mapped})"
    ]
    if info["kind"] == "refused":
        lines.append("  not loaded: it needs arbitrary unpickling (see TD902)")
        return lines
    lines.append(f"  kind: {info['kind']}" + ("  (loaded with --trust)" if info["trusted"] else ""))
    for key, description in info["top_level"].items():
        lines.append(f"  [{key}] {description}")
    lines.append(f"  tensors: {info['tensor_count']}, {human_bytes(info['tensor_bytes'])}")
    lines.append(f"  dtypes: {_counts(info['dtypes'])}")
    lines.append(f"  saved from: {_counts(info['saved_from'])}")
    lines.append(f"  non-finite: {info['non_finite_tensors'] or 'none'}")
    return lines


def _comparison(info: Mapping[str, Any]) -> list[str]:
    where = f"'{info['state_dict']}'" if info["state_dict"] else "the state_dict"
    head = f"  against {info['model']} ({info['model_keys']} keys), {where}: "
    if info["loads_strict"]:
        return [head + "loads with strict=True"]
    lines = [
        head + f"{len(info['missing'])} missing, {len(info['unexpected'])} unexpected, "
        f"{len(info['shape_mismatches'])} shape mismatches"
    ]
    for rewrite in info["mapping"]:
        lines.append(f"    {_rewrite(rewrite['old'], rewrite['new'])}: {rewrite['keys']} keys")
    if info["mapping"]:
        verdict = "loads" if info["loads_after_mapping"] else "still does not load"
        lines.append(f"    after renaming, it {verdict} with strict=True")
    return lines


def _rewrite(old: str, new: str) -> str:
    if not new:
        return f"strip '{old}'"
    return f"add '{new}'" if not old else f"rename '{old}' -> '{new}'"


def _diff(info: Mapping[str, Any]) -> list[str]:
    lines = [
        "",
        f"diff {info['first']} -> {info['second']}"
        + ("  (primary state_dicts aligned)" if info["aligned_on"] == "state_dict" else ""),
    ]
    for label, keys in (
        ("only in first", info["only_first"]),
        ("only in second", info["only_second"]),
    ):
        if keys:
            lines.append(
                f"  {label} ({len(keys)}): "
                + ", ".join(keys[:20])
                + (" ..." if len(keys) > 20 else "")
            )
    rows = [row for row in info["tensors"] if _differs(row)]
    same = len(info["tensors"]) - len(rows)
    lines.append(f"  {len(info['tensors'])} common tensors, {same} identical")
    width = max((len(row["key"]) for row in rows[:_DIFF_ROWS]), default=0)
    for row in rows[:_DIFF_ROWS]:
        lines.append(f"    {row['key']:<{width}}  {_change(row)}")
    if len(rows) > _DIFF_ROWS:
        lines.append(f"    ... {len(rows) - _DIFF_ROWS} more (see --format json)")
    return lines


def _differs(row: Mapping[str, Any]) -> bool:
    return bool(row["max_abs_difference"] != 0.0 or row["dtype"] != row["other_dtype"])


def _change(row: Mapping[str, Any]) -> str:
    if row["max_abs_difference"] is None:
        return f"shape {row['shape']} -> {row['other_shape']}"
    parts = [f"max |diff| {row['max_abs_difference']:.4g}"]
    if row["dtype"] != row["other_dtype"]:
        parts.append(f"dtype {row['dtype']} -> {row['other_dtype']}")
    return ", ".join(parts)
