"""One parse and one traversal per file, for every rule at once.

:func:`lint_text` is the whole per-file pipeline: decode, parse, run the rules, filter
``# noqa``. The traversal is iterative (an explicit stack), so deeply nested code cannot
overflow the interpreter's stack. The dispatch table (node class -> handlers) is built once
per process from the registered rule classes; per file, the engine only binds the
handlers of the rules that are enabled and whose ``requires`` pre-filter matches.

A rule that raises is switched off for the rest of the file and reported as one
``TD001`` finding naming the rule and the file (built by :mod:`torchdoctor._kernel`, its
traceback under :data:`TRACEBACK` until a report keeps it apart); the other rules carry on.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from torchdoctor._kernel import Reporter, internal_error, selected, wanted
from torchdoctor.findings import TRACEBACK, Depth, Finding, Location
from torchdoctor.rules.selection import Selection
from torchdoctor.static.context import FileContext
from torchdoctor.static.rules.base import SCOPE_HOOKS, LintRule
from torchdoctor.static.walker import Walker

__all__ = ["TRACEBACK", "RuleSpec", "lint_tree", "rule_specs"]


@dataclass(frozen=True, slots=True)
class RuleSpec:
    """A registered rule class and the hooks it defines (computed once)."""

    cls: type[LintRule]
    codes: tuple[str, ...]
    visits: tuple[tuple[type[ast.AST], str], ...]
    leaves: tuple[str, ...]
    call_names: frozenset[str]

    @property
    def name(self) -> str:
        """The rule class's qualified name, for error messages."""
        return self.cls.__qualname__

    @property
    def needs_structure(self) -> bool:
        """Whether the walker must record loops and items for this rule."""
        return self.cls.needs_structure or bool(self.leaves)


_SPECS: list[RuleSpec] | None = None


def rule_specs() -> list[RuleSpec]:
    """Every registered lint rule class with its hooks, built once per process."""
    global _SPECS
    if _SPECS is None:
        import torchdoctor.static.rules  # noqa: F401 - registers the rules
        from torchdoctor.rules.detectors import registered_detectors

        specs = []
        for info in registered_detectors(Depth.LINT):
            target = info.target
            if isinstance(target, type) and issubclass(target, LintRule):
                specs.append(_spec(target, info.codes))
        _SPECS = specs
    return _SPECS


def _spec(cls: type[LintRule], codes: tuple[str, ...]) -> RuleSpec:
    cls.codes = codes
    visits = []
    for attribute in dir(cls):
        if attribute.startswith("visit_") and attribute != "visit_call":
            node_class = getattr(ast, attribute[len("visit_") :], None)
            if isinstance(node_class, type) and issubclass(node_class, ast.AST):
                visits.append((node_class, attribute))
    leaves = tuple(hook for hook in SCOPE_HOOKS if getattr(cls, hook, None) is not None)
    call_names = cls.call_names if hasattr(cls, "visit_call") else frozenset[str]()
    return RuleSpec(cls, codes, tuple(visits), leaves, frozenset(call_names))


def lint_tree(ctx: FileContext, selection: Selection) -> list[Finding]:
    """Run every enabled rule over one parsed file and return its findings."""
    findings: list[Finding] = []
    present: dict[str, bool] = {}
    active: list[tuple[RuleSpec, LintRule]] = []
    enabled, within = _enabled(selection)
    source = ctx.source
    for spec in enabled:
        requires = spec.cls.requires
        if requires and not any(_contains(source, token, present, within) for token in requires):
            continue
        active.append((spec, spec.cls(ctx, Reporter(findings.append, Depth.LINT, spec.codes))))
    if not active:
        return []
    guard = _Guard(ctx, findings)
    walker = Walker(ctx, structure=any(spec.needs_structure for spec, _ in active))
    for spec, rule in active:
        for node_class, attribute in spec.visits:
            walker.subscribe(node_class, guard.wrap(spec, rule, getattr(rule, attribute)))
        if spec.call_names:
            handler = guard.wrap(spec, rule, getattr(rule, "visit_call"))  # noqa: B009
            for name in spec.call_names:
                walker.subscribe_call(name, handler)
        for hook in spec.leaves:
            walker.subscribe_leave(hook, guard.wrap(spec, rule, getattr(rule, hook)))
    walker.walk()
    walker.release()
    return selected(findings, selection)


# The rules a selection enables, for the last (rule list, selection) asked: every file of
# a run asks the same question, and answering it costs a prefix match per code and rule.
# With them, for each token the rules require, the other required tokens found inside it.
_ENABLED: (
    tuple[list[RuleSpec], Selection, tuple[RuleSpec, ...], dict[str, tuple[str, ...]]] | None
) = None


def _enabled(selection: Selection) -> tuple[tuple[RuleSpec, ...], dict[str, tuple[str, ...]]]:
    global _ENABLED
    specs = rule_specs()
    last = _ENABLED
    if last is not None and last[0] is specs and last[1] == selection:
        return last[2], last[3]
    enabled = tuple(spec for spec in specs if wanted(spec.codes, selection))
    tokens = {token for spec in enabled for token in spec.cls.requires}
    within = {
        token: parts
        for token in tokens
        if (parts := tuple(sorted(t for t in tokens if t != token and t in token)))
    }
    _ENABLED = (specs, selection, enabled, within)
    return enabled, within


def _contains(
    source: str, token: str, memo: dict[str, bool], within: dict[str, tuple[str, ...]]
) -> bool:
    """Whether ``token`` occurs in ``source``, memoised per file. A token holding another
    required token that is absent (``"step("`` and ``"step"``) is absent without a scan:
    most files lack most tokens, and each absent one costs a scan of the whole file."""
    found = memo.get(token)
    if found is None:
        for part in within.get(token, ()):
            if not _contains(source, part, memo, within):
                memo[token] = False
                return False
        found = memo[token] = token in source
    return found


class _Guard:
    """Wraps rule hooks so that a rule that raises is reported once and switched off."""

    def __init__(self, ctx: FileContext, findings: list[Finding]) -> None:
        self.ctx = ctx
        self.findings = findings
        self.failed: set[str] = set()

    def wrap(
        self, spec: RuleSpec, rule: LintRule, hook: Callable[[Any], None]
    ) -> Callable[[Any], None]:
        failed = self.failed
        name = spec.name

        def guarded(argument: Any) -> None:
            if name in failed:
                return
            try:
                hook(argument)
            except Exception as error:  # noqa: BLE001 - a rule bug must not stop the others
                failed.add(name)
                self.findings.append(self._internal_error(spec, argument, error))

        return guarded

    def _internal_error(self, spec: RuleSpec, argument: Any, error: Exception) -> Finding:
        line = getattr(getattr(argument, "node", argument), "lineno", None)
        return internal_error(
            f"lint rule {spec.name}",
            error,
            Depth.LINT,
            Location(path=self.ctx.path, line=line),
            codes=spec.codes,
            during=f" on {self.ctx.path}{f' near line {line}' if line else ''}",
            consequence="its findings for this file are missing, the other rules ran",
        )
