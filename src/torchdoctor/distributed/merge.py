"""One report for a multi-process job: the parts of every process, merged.

Each watched process (a rank, a spawned worker, a subprocess) writes its own report as a
*part* (see :func:`torchdoctor.runtime.children.write_part`). :func:`merge_parts` joins
them into the report of the process that launched them: a problem that several ranks
showed becomes one finding whose :attr:`~torchdoctor.findings.Finding.ranks` lists them,
and whose message says so ("ranks 1, 3 of 4"). The report's facts gain ``world_size``,
``ranks`` (per-rank steps and exit status) and ``missing_ranks`` when a rank wrote
nothing (it died, or never started). No torch is imported here.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from torchdoctor.findings import Finding, Report

__all__ = ["Part", "describe_ranks", "merge_parts", "read_parts"]

# Rules whose findings are only problems when several ranks show them at one place
# (every rank writing the same checkpoint file).
_NEEDS_SEVERAL_RANKS = frozenset({"TD804"})


@dataclass(frozen=True, slots=True)
class Part:
    """One process's report, with the rank it ran as (``None`` when not a rank)."""

    report: Report
    rank: int | None
    world_size: int | None
    pid: int
    label: str = ""


def read_parts(paths: Iterable[Path]) -> list[Part]:
    """Read the part files; an unreadable one (a process killed mid-write) is skipped."""
    from torchdoctor.report.json import report_from_json

    parts = []
    for path in paths:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            meta = data["meta"]
            report = report_from_json(json.dumps(data["report"]))
        except (OSError, ValueError, KeyError, TypeError):
            continue
        parts.append(
            Part(
                report,
                _int(meta.get("rank")),
                _int(meta.get("world_size")),
                int(meta.get("pid") or 0),
                str(meta.get("label") or ""),
            )
        )
    return parts


def merge_parts(base: Report, parts: list[Part]) -> Report:
    """Merge the processes' parts into ``base`` (the launching process's report).

    Parts of processes that trained nothing and found nothing (a helper subprocess) are
    left out. A part without a rank is numbered after the known ranks, by process id.
    """
    useful = [p for p in parts if _trained(p.report) or p.report.findings]
    if not useful:
        return base
    numbered = _number(useful)
    world = max([len(numbered), *(p.world_size or 0 for _, p in numbered)])
    merged = Report(
        tool_version=base.tool_version,
        command=base.command,
        created=base.created,
        facts=base.facts.copy(),
        series=dict(base.series),
        exit_status=base.exit_status,
    )
    merged.extend(base.findings)
    gathered = Report()
    for rank, part in numbered:
        gathered.extend(replace(f, ranks=(rank,)) for f in part.report.findings)
    for finding in gathered.findings:
        if finding.code in _NEEDS_SEVERAL_RANKS and len(finding.ranks) < 2:
            continue
        merged.add(_with_ranks_said(finding, world))
    _merge_facts(merged, numbered, world)
    return merged


def describe_ranks(ranks: Iterable[int], world_size: int) -> str:
    """``"all 4 ranks"``, ``"rank 2 of 4"`` or ``"ranks 1, 3 of 4"``."""
    ranks = sorted(set(ranks))
    if world_size > 1 and len(ranks) == world_size:
        return f"all {world_size} ranks"
    word = "rank" if len(ranks) == 1 else "ranks"
    return f"{word} {', '.join(str(r) for r in ranks)} of {world_size}"


def _with_ranks_said(finding: Finding, world: int) -> Finding:
    if world < 2 or not finding.ranks:
        return finding
    return replace(finding, message=f"{finding.message} ({describe_ranks(finding.ranks, world)})")


def _number(parts: list[Part]) -> list[tuple[int, Part]]:
    known = {p.rank for p in parts if p.rank is not None}
    next_rank = max(known, default=-1) + 1
    numbered: list[tuple[int, Part]] = []
    for part in sorted(parts, key=lambda p: (p.rank is None, p.rank or 0, p.pid)):
        rank = part.rank
        if rank is None or any(rank == r for r, _ in numbered):
            rank, next_rank = next_rank, next_rank + 1
        numbered.append((rank, part))
    return numbered


def _trained(report: Report) -> bool:
    facts = report.facts
    return bool(facts.get("steps") or facts.get("backward_calls"))


def _merge_facts(merged: Report, numbered: list[tuple[int, Part]], world: int) -> None:
    facts = merged.facts
    per_rank: dict[str, Any] = {}
    for rank, part in numbered:
        f = part.report.facts
        per_rank[str(rank)] = {
            key: f[key] for key in ("steps", "backward_calls", "duration_s") if key in f
        }
        per_rank[str(rank)]["exit_status"] = part.report.exit_status
        if part.label:
            per_rank[str(rank)]["process"] = part.label
    facts["world_size"] = world
    facts["ranks"] = per_rank
    missing = sorted(set(range(world)) - {rank for rank, _ in numbered})
    if missing:
        facts["missing_ranks"] = missing
    first = numbered[0][1].report
    if not _trained(merged):
        # The launcher trained nothing itself: the job's headline facts are rank 0's.
        for key, value in first.facts.items():
            facts.setdefault(key, value)
        facts["steps"] = first.facts.get("steps", 0)
        if not merged.series:
            merged.series.update(first.series)


def _int(value: Any) -> int | None:
    try:
        return None if value is None else int(value)
    except (TypeError, ValueError):
        return None
