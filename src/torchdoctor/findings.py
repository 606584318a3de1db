"""The one data model every depth produces and every renderer reads.

A :class:`Finding` is one problem seen at one place. A :class:`Report` holds the findings
of a run of torchdoctor plus the facts it measured. Nothing here imports torch, prints or
reads the clock: the depths fill reports, the renderers in :mod:`torchdoctor.report` turn
them into text.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from torchdoctor.facts import Facts

__all__ = [
    "Applicability",
    "Confidence",
    "Depth",
    "Edit",
    "Finding",
    "Fix",
    "INTERNAL_ERRORS",
    "INTERNAL_ERROR_CODE",
    "Location",
    "Report",
    "Severity",
    "TRACEBACK",
]


class Severity(enum.Enum):
    """How bad a finding is. Ordered: ``INFO < WARNING < ERROR``."""

    INFO = "info"
    WARNING = "warning"
    ERROR = "error"

    @property
    def rank(self) -> int:
        """0 for info, 1 for warning, 2 for error: use it to compare severities."""
        return _SEVERITY_RANK[self]

    def __ge__(self, other: object) -> bool:
        if not isinstance(other, Severity):
            return NotImplemented
        return self.rank >= other.rank

    def __gt__(self, other: object) -> bool:
        if not isinstance(other, Severity):
            return NotImplemented
        return self.rank > other.rank

    def __le__(self, other: object) -> bool:
        if not isinstance(other, Severity):
            return NotImplemented
        return self.rank <= other.rank

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Severity):
            return NotImplemented
        return self.rank < other.rank


_SEVERITY_RANK = {Severity.INFO: 0, Severity.WARNING: 1, Severity.ERROR: 2}


class Depth(enum.Enum):
    """Which part of torchdoctor saw a problem."""

    LINT = "lint"  # static: source code, never imported
    CHECK = "check"  # pre-flight: one model, one batch, a few probe steps
    RUN = "run"  # runtime: the user's real training run
    CKPT = "ckpt"  # a checkpoint file
    ENV = "env"  # the Python/torch/CUDA environment


class Confidence(enum.Enum):
    """How sure a detector is. Messages say "may" only at ``LOW``."""

    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


class Applicability(enum.Enum):
    """Whether an automatic fix keeps behaviour (``SAFE``) or may change it (``UNSAFE``)."""

    SAFE = "safe"
    UNSAFE = "unsafe"


@dataclass(frozen=True, slots=True)
class Location:
    """Where a finding points.

    Source findings carry ``path`` and ``line`` (1-based) and ``column`` (0-based, like
    ``ast``). Findings about live objects carry ``object``: a module path such as
    ``encoder.layers.3.attn``, a parameter name, or a checkpoint key. Both may be set, for
    example a runtime finding located at the user's line *and* a module path.
    ``snippet`` holds the source line(s) so renderers can show a code frame without I/O.
    """

    path: str | None = None
    line: int | None = None
    column: int | None = None
    end_line: int | None = None
    end_column: int | None = None
    object: str | None = None
    snippet: str | None = None

    def __str__(self) -> str:
        parts: list[str] = []
        if self.path is not None:
            place = self.path
            if self.line is not None:
                place += f":{self.line}"
                if self.column is not None:
                    place += f":{self.column + 1}"
            parts.append(place)
        if self.object is not None:
            parts.append(self.object)
        return " ".join(parts) if parts else "<unknown>"

    @property
    def sort_key(self) -> tuple[bool, str, int, int, str]:
        """Stable ordering: places in files first (by file, line, column), then objects."""
        return (
            self.path is None,
            self.path or "",
            self.line or 0,
            self.column or 0,
            self.object or "",
        )


@dataclass(frozen=True, slots=True)
class Edit:
    """Replace the text between two source positions.

    Positions are ``(line, column)`` with 1-based lines and 0-based columns counted in
    characters, the convention of ``ast`` nodes' ``lineno``/``col_offset`` once decoded.
    """

    start_line: int
    start_column: int
    end_line: int
    end_column: int
    replacement: str


@dataclass(frozen=True, slots=True)
class Fix:
    """An automatic fix: text edits plus whether applying them is behaviour-preserving."""

    description: str
    edits: tuple[Edit, ...]
    applicability: Applicability = Applicability.SAFE


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem, seen at one place, with the evidence and the way to fix it.

    Attributes:
        code: the rule code, e.g. ``"TD201"``; see :mod:`torchdoctor.rules`.
        message: specific text naming the thing and the evidence.
        location: where it is.
        severity: usually the rule's default; a detector may lower it.
        depth: the depth that saw it first.
        fix_hint: imperative advice ("Call `optimizer.zero_grad()` ...").
        evidence: measured numbers or facts behind the message (JSON-serialisable).
        confidence: how sure the detector is.
        fix: automatic edits, for findings from source.
        depths: every depth that reported it (more than one after merging).
        occurrences: how many times the same rule fired at the same place.
        ranks: the ranks (processes) of a multi-process job that showed it; empty for a
            single process.
    """

    code: str
    message: str
    location: Location
    severity: Severity
    depth: Depth
    fix_hint: str = ""
    evidence: Mapping[str, Any] = field(default_factory=dict, hash=False)
    confidence: Confidence = Confidence.HIGH
    fix: Fix | None = None
    depths: tuple[Depth, ...] = ()
    occurrences: int = 1
    ranks: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if not self.depths:
            object.__setattr__(self, "depths", (self.depth,))

    @property
    def merge_key(self) -> tuple[str, str | None, int | None, str | None]:
        """Findings with equal keys are the same problem at the same place."""
        loc = self.location
        return (self.code, loc.path, loc.line, loc.object)

    @property
    def sort_key(self) -> tuple[bool, str, int, int, str, str]:
        """Deterministic report order: file, line, column, object, code."""
        return (*self.location.sort_key, self.code)

    def merged_with(self, other: Finding) -> Finding:
        """Combine two findings of the same rule and place (see :attr:`merge_key`).

        The worst severity and the highest confidence win; depths are united; the first
        message is kept (it is usually the most specific); evidence is joined.
        """
        depths = tuple(d for d in Depth if d in self.depths or d in other.depths)
        confidence = min((self.confidence, other.confidence), key=list(Confidence).index)
        same_depth = set(other.depths) <= set(self.depths)
        return replace(
            self,
            severity=max(self.severity, other.severity),
            evidence={**other.evidence, **self.evidence},
            confidence=confidence,
            fix=self.fix or other.fix,
            fix_hint=self.fix_hint or other.fix_hint,
            location=_richer_location(self.location, other.location),
            depths=depths,
            occurrences=self.occurrences + other.occurrences if same_depth else self.occurrences,
            ranks=tuple(sorted(set(self.ranks) | set(other.ranks))),
        )


def _richer_location(first: Location, second: Location) -> Location:
    """Fill the gaps of one location from another that points at the same place (a
    module named by ``check`` gains the line where ``run`` saw it assigned)."""
    sourced = first.path is not None
    return replace(
        first,
        path=first.path if sourced else second.path,
        line=first.line if sourced else second.line,
        column=first.column if first.column is not None else second.column,
        end_line=first.end_line if first.end_line is not None else second.end_line,
        end_column=first.end_column if first.end_column is not None else second.end_column,
        snippet=first.snippet if first.snippet is not None else second.snippet,
        object=first.object if first.object is not None else second.object,
    )


@dataclass(slots=True)
class Report:
    """Findings plus the facts of the run that produced them.

    Adding a finding that matches an existing one (same rule and place, see
    :attr:`Finding.merge_key`) merges them, so a problem seen by ``lint`` and by ``run``
    shows once, with both depths. A ``TD001`` (internal error) finding's traceback is
    taken out of its evidence into ``facts["internal_errors"]``, whatever the depth.

    Attributes:
        tool_version: torchdoctor's version.
        command: what produced the report (``"check"``, ``"lint"``, ``"run"``, ...).
        created: ISO-8601 timestamp, set by the caller; renderers never read the clock.
        facts: measured facts of the run (steps, timings, versions), JSON-serialisable;
            each key and its type are declared in :mod:`torchdoctor.facts`, which checks
            every write (a plain dict given here is taken in and checked).
        series: named sequences for plots (loss per step, ...).
        exit_status: the user's script's own exit status, for ``run``.
    """

    tool_version: str = ""
    command: str = ""
    created: str = ""
    facts: Facts = field(default_factory=Facts)
    series: dict[str, list[float]] = field(default_factory=dict)
    exit_status: int | None = None
    _findings: dict[tuple[str, str | None, int | None, str | None], Finding] = field(
        default_factory=dict, init=False, repr=False
    )
    _depths: set[Depth] = field(  # of every finding so far
        default_factory=set, init=False, repr=False, compare=False
    )
    _ordered: list[Finding] | None = field(  # findings in report order, until the next add
        default=None, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if not isinstance(self.facts, Facts):
            self.facts = Facts(self.facts)

    def add(self, finding: Finding) -> None:
        """Add one finding, merging it into an equal one already present.

        Besides an exact match of :attr:`Finding.merge_key`, a finding from another depth
        merges when it has the same rule and either the same file and line (``lint`` sees
        the line, ``run`` sees the line *and* the optimizer) or the same object where one
        of the two has no file (``check`` names the module, ``run`` also the line that
        assigns it).
        """
        if finding.code == INTERNAL_ERROR_CODE and TRACEBACK in finding.evidence:
            finding = self._keep_traceback_apart(finding)
        key = self._key_for(finding)
        self._ordered = None
        self._depths.update(finding.depths)
        existing = self._findings.pop(key, None)
        merged = finding if existing is None else existing.merged_with(finding)
        new_key = merged.merge_key
        if new_key != key and new_key in self._findings:
            merged = self._findings[new_key].merged_with(merged)
        self._findings[new_key] = merged

    def _keep_traceback_apart(self, finding: Finding) -> Finding:
        """A ``TD001`` finding's traceback goes to ``facts["internal_errors"]``: the one
        place every command keeps them (``torchdoctor --debug`` prints them)."""
        evidence = dict(finding.evidence)
        self.facts.setdefault(INTERNAL_ERRORS, []).append(str(evidence.pop(TRACEBACK)))
        return replace(finding, evidence=evidence)

    def _key_for(self, finding: Finding) -> tuple[str, str | None, int | None, str | None]:
        key = finding.merge_key
        # Only a finding from another depth can merge across depths: a one-depth report
        # (lint over a large code base) never scans.
        if key in self._findings or not self._depths - set(finding.depths):
            return key
        code, path, line, name = key
        for other_key, other in self._findings.items():
            if other_key[0] != code or set(other.depths) & set(finding.depths):
                continue
            if path is not None and other_key[1:3] == (path, line):
                return other_key
            if name is not None and other_key[3] == name and None in (path, other_key[1]):
                return other_key
        return key

    def extend(self, findings: Iterable[Finding]) -> None:
        """Add several findings."""
        for finding in findings:
            self.add(finding)

    def merge(self, other: Report) -> None:
        """Take in another report's findings, facts and series."""
        self.extend(other.findings)
        traces = [*self.facts.get(INTERNAL_ERRORS, ()), *other.facts.get(INTERNAL_ERRORS, ())]
        self.facts.update(other.facts)
        if traces:
            self.facts[INTERNAL_ERRORS] = traces
        self.series.update(other.series)

    @property
    def findings(self) -> list[Finding]:
        """All findings, in deterministic order (file, line, column, object, code).

        Sorted once after the last :meth:`add`; each access returns a new list.
        """
        if self._ordered is None:
            self._ordered = sorted(self._findings.values(), key=lambda f: f.sort_key)
        return list(self._ordered)

    def __iter__(self) -> Iterator[Finding]:
        if self._ordered is None:
            self._ordered = sorted(self._findings.values(), key=lambda f: f.sort_key)
        return iter(tuple(self._ordered))

    def __len__(self) -> int:
        return len(self._findings)

    def codes(self) -> set[str]:
        """The set of rule codes present."""
        return {f.code for f in self._findings.values()}

    def by_code(self, code: str) -> list[Finding]:
        """Findings with exactly this code, in report order."""
        return [f for f in self if f.code == code]

    def worst_severity(self) -> Severity | None:
        """The highest severity present, or ``None`` for an empty report."""
        return max((f.severity for f in self._findings.values()), default=None)

    def exit_code(self, fail_on: Severity | None = Severity.ERROR) -> int:
        """0 when no finding reaches ``fail_on``, 1 otherwise; 2 on an internal error.

        ``fail_on=None`` never fails on findings (used by ``run`` to pass the script's own
        status through).
        """
        if any(f.code == INTERNAL_ERROR_CODE for f in self._findings.values()):
            return 2
        if fail_on is None:
            return 0
        worst = self.worst_severity()
        return 1 if worst is not None and worst >= fail_on else 0

    def counts(self) -> dict[str, int]:
        """Number of findings per severity name, every severity present as a key."""
        counts = {s.value: 0 for s in Severity}
        for finding in self._findings.values():
            counts[finding.severity.value] += 1
        return counts

    def _repr_html_(self) -> str:
        """The HTML report, for Jupyter and other notebooks (in a frame of its own).

        The renderer reads this module, so it is not imported from here: the package
        installs it with :func:`set_html_renderer` when ``torchdoctor`` is imported (which
        any import of this module does first)."""
        if _html_renderer is None:
            from html import escape

            return f"<pre>{escape(repr(self))}</pre>"
        return _html_renderer(self)


HtmlRenderer = Callable[[Report], str]

# What Report._repr_html_ draws with; torchdoctor/__init__.py installs the HTML report's
# notebook page (imported on first use, so that `import torchdoctor` stays cheap).
_html_renderer: HtmlRenderer | None = None


def set_html_renderer(renderer: HtmlRenderer | None) -> HtmlRenderer | None:
    """Make ``renderer`` draw :meth:`Report._repr_html_`; returns the one it replaces."""
    global _html_renderer
    previous, _html_renderer = _html_renderer, renderer
    return previous


INTERNAL_ERROR_CODE = "TD001"

# The evidence key under which a ``TD001`` finding arrives with its traceback text, and
# the fact under which a :class:`Report` keeps those texts instead.
TRACEBACK = "traceback"
INTERNAL_ERRORS = "internal_errors"
