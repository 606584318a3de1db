"""Runtime detector: ``torch.compile`` graph breaks (TD707) and recompilations (TD708).

It reads torch's own records at the end of the run, so it costs nothing while training:
``torch._dynamo.utils.graph_break_reasons`` (each break's reason and user stack) and
``torch._dynamo.utils.guard_failures`` (per compiled function, why its cached graphs no
longer fit). Both are feature-checked: on a torch without them, or a run that never
compiles, the detector reports nothing. Only what happened after the monitor attached is
counted.
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from torchdoctor.findings import Depth, Finding, Location, Report
from torchdoctor.rules.detectors import detector
from torchdoctor.rules.registry import finding
from torchdoctor.runtime.detectors.base import MonitorView, RuntimeDetector
from torchdoctor.runtime.exceptions.compile_reasons import graph_break_advice, recompile_advice
from torchdoctor.runtime.exceptions.frames import FrameRef, is_torchdoctor_file, user_frame

__all__ = [
    "CompileWatcher",
    "GraphBreak",
    "Recompilation",
    "Snapshot",
    "graph_break_finding",
    "graph_breaks",
    "recompilation_finding",
    "recompilations",
    "snapshot",
]

# A function recompiled this many times is "repeatedly": a train/eval switch, a smaller
# last batch and a grad-mode change explain up to three.
REPEATED_RECOMPILES = 4
_COMPILE_ID = re.compile(r"^\s*\[?\d+/\d+\]?:\s*")
_FIRST_ENTRY = re.compile(r"^\s*\[?\d+/0\]?:")
_RESUME = re.compile(r"^torch_dynamo_resume_in_(?P<function>\w+?)_at_(?P<line>\d+)$")


@dataclass(frozen=True, slots=True)
class Snapshot:
    """How much of torch's compile records existed when the monitor attached."""

    graph_breaks: int = 0
    guard_failures: Mapping[Any, int] | None = None


@dataclass(frozen=True, slots=True)
class GraphBreak:
    """One distinct graph break: why, where, and how often it was traced."""

    reason: str
    explanation: str
    hints: tuple[str, ...]
    frame: FrameRef | None
    count: int


@dataclass(frozen=True, slots=True)
class Recompilation:
    """A compiled function that was compiled again, with the guards that failed."""

    function: str
    path: str
    line: int
    count: int
    reasons: tuple[str, ...]
    limit: int | None

    @property
    def limit_hit(self) -> bool:
        """Whether torch stopped compiling it (``recompile_limit`` reached)."""
        return self.limit is not None and self.count >= self.limit


def _dynamo_utils() -> Any:
    return sys.modules.get("torch._dynamo.utils")


def snapshot() -> Snapshot:
    """What torch has recorded so far (empty when ``torch._dynamo`` is not loaded)."""
    utils = _dynamo_utils()
    if utils is None:
        return Snapshot()
    breaks = getattr(utils, "graph_break_reasons", None)
    failures = getattr(utils, "guard_failures", None)
    return Snapshot(
        len(breaks) if isinstance(breaks, list) else 0,
        {code: len(reasons) for code, reasons in dict(failures or {}).items()},
    )


def graph_breaks(since: Snapshot, roots: Iterable[str] = ()) -> list[GraphBreak]:
    """Distinct graph breaks recorded after ``since``, most frequent first.

    Breaks inside torchdoctor's own hooks are left out: they are ours, not the user's.
    """
    utils = _dynamo_utils()
    records = getattr(utils, "graph_break_reasons", None)
    if not isinstance(records, list):
        return []
    start = since.graph_breaks if since.graph_breaks <= len(records) else 0
    grouped: dict[tuple[str, str | None, int | None], list[Any]] = {}
    for record in records[start:]:
        stack = [
            FrameRef(f.filename, f.lineno or 0, f.name)
            for f in getattr(record, "user_stack", None) or []
        ]
        if stack and is_torchdoctor_file(stack[-1].path):
            continue
        frame = user_frame(stack, tuple(roots)) or (stack[-1] if stack else None)
        title = _title(str(getattr(record, "reason", "")))
        key = (title, frame.path if frame else None, frame.line if frame else None)
        grouped.setdefault(key, []).append((record, frame))
    found = []
    for (title, _, _), items in grouped.items():
        text = str(getattr(items[0][0], "reason", ""))
        found.append(GraphBreak(title, _explanation(text), _hints(text), items[0][1], len(items)))
    return sorted(found, key=lambda b: -b.count)


def _title(reason: str) -> str:
    lines = [line.strip() for line in reason.strip().splitlines() if line.strip()]
    return lines[0] if lines else "unknown reason"


def _explanation(reason: str) -> str:
    match = re.search(r"Explanation:\s*(.+)", reason)
    return match.group(1).strip() if match else ""


def _hints(reason: str) -> tuple[str, ...]:
    hints = [h.strip() for h in re.findall(r"Hint:\s*(.+)", reason)]
    return tuple(h for h in hints if "report an issue" not in h.lower())[:2]


def recompilations(since: Snapshot) -> list[Recompilation]:
    """Functions compiled again after ``since``, with their distinct guard-failure reasons."""
    utils = _dynamo_utils()
    failures = getattr(utils, "guard_failures", None)
    if not isinstance(failures, Mapping):
        return []
    before = since.guard_failures or {}
    found = []
    for code, reasons in list(failures.items()):
        new = [str(r) for r in list(reasons)[before.get(code, 0) :]]
        if not new or not hasattr(code, "co_filename"):
            continue
        function, line = code.co_name, code.co_firstlineno
        resumed = _RESUME.match(function)
        if resumed:  # the rest of a function after a graph break
            function = f"{resumed['function']} (after its graph break at line {resumed['line']})"
        distinct = tuple(dict.fromkeys(_clean_reason(r) for r in new))
        found.append(
            Recompilation(
                function, code.co_filename, line, _events(new), distinct, _recompile_limit()
            )
        )
    return found


def _clean_reason(reason: str) -> str:
    first = reason.strip().splitlines()[0] if reason.strip() else ""
    first = _COMPILE_ID.sub("", first)
    return re.sub(r"\s{2,}#.*$", "", first).strip()


def _events(reasons: list[str]) -> int:
    """How many recompilations produced ``reasons``.

    Each recompilation records one reason per cached graph, the first graph included; torch
    >= 2.3 prefixes reasons with the graph's compile id (``0/0:``), so counting the first
    graph's reasons counts recompilations. Older reasons have no prefix: n recompilations
    leave 1 + 2 + ... + n reasons.
    """
    prefixed = [r for r in reasons if _COMPILE_ID.match(r)]
    if prefixed:
        return max(1, sum(1 for r in prefixed if _FIRST_ENTRY.match(r)))
    return max(1, int((math.sqrt(8 * len(reasons) + 1) - 1) // 2))


def _recompile_limit() -> int | None:
    config = sys.modules.get("torch._dynamo.config")
    for name in ("recompile_limit", "cache_size_limit"):
        value = getattr(config, name, None)
        if isinstance(value, int):
            return value
    return None


def graph_break_finding(found: GraphBreak) -> Finding:
    """TD707 for one distinct graph break, located at the user's line."""
    advice = graph_break_advice(f"{found.reason}\n{found.explanation}")
    frame = found.frame
    where = f" at {frame.where}" if frame else ""
    what = advice.meaning if advice else (found.explanation or found.reason)
    message = (
        f"torch.compile breaks the graph{where}"
        f"{f' in `{frame.function}`' if frame else ''}: {what} "
        f'(torch: "{_shorten(found.reason)}"). The code before and after runs as '
        "separate graphs with Python in between, which costs speed and blocks "
        "optimisations across the break."
    )
    fix = (
        advice.fix
        if advice
        else " ".join(found.hints)
        or ("Rewrite the construct torch names, or move it out of the compiled code.")
    )
    location = (
        Location(path=frame.path, line=frame.line, snippet=frame.snippet)
        if frame
        else Location(object="torch.compile")
    )
    return finding(
        "TD707",
        message,
        location,
        Depth.RUN,
        fix_hint=fix,
        evidence={
            "reason": _shorten(found.reason, 300),
            "times_traced": found.count,
            "explanation": _shorten(found.explanation, 300),
        },
    )


def recompilation_finding(item: Recompilation) -> Finding | None:
    """TD708 for a function recompiled repeatedly (or up to torch's limit), else ``None``."""
    if item.count < REPEATED_RECOMPILES and not item.limit_hit:
        return None
    last = item.reasons[-1] if item.reasons else "unknown"
    advice = recompile_advice(last)
    message = (
        f"torch.compile recompiled `{item.function}` ({_where(item)}) {item.count} "
        f"times because {advice.meaning} (last guard that failed: `{_shorten(last)}`)"
    )
    if item.limit_hit:
        message += (
            f"; it reached `recompile_limit` ({item.limit}), so from then on this "
            "function runs uncompiled"
        )
    message += "."
    return finding(
        "TD708",
        message,
        Location(path=item.path, line=item.line, object=item.function),
        Depth.RUN,
        fix_hint=advice.fix,
        evidence={
            "recompilations": item.count,
            "limit": item.limit,
            "reasons": [_shorten(r, 200) for r in item.reasons[-5:]],
        },
    )


def _where(item: Recompilation) -> str:
    return FrameRef(item.path, item.line, item.function).where


def _shorten(text: str, limit: int = 120) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


@detector("TD707", "TD708", depth=Depth.RUN)
class CompileWatcher(RuntimeDetector):
    """Reports the graph breaks and repeated recompilations of the watched run."""

    _since: Snapshot = Snapshot()

    def on_attach(self, monitor: MonitorView) -> None:
        """Remember what torch had already recorded, so only this run is counted."""
        super().on_attach(monitor)
        self._since = snapshot()

    def on_finish(self, report: Report) -> None:
        """Read torch's records once and emit one finding per break and per function."""
        roots = [str(root) for root in self.monitor.user_roots]
        for found in graph_breaks(self._since, roots):
            self.emit(graph_break_finding(found))
        for item in recompilations(self._since):
            result = recompilation_finding(item)
            if result is not None:
                self.emit(result)
