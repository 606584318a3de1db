"""The base class of every lint rule. The rule-writing guide is in this package's docstring.

A rule class is instantiated once per file, with that file's :class:`FileContext`. The
engine finds its hooks by name when it builds the dispatch table (once per process):

* ``visit_<NodeClass>(self, node)`` for every node of that ``ast`` class, in source order;
* ``visit_call(self, node)`` for every call whose callee's last name is in
  :attr:`LintRule.call_names` (``model.forward(x)`` has last name ``forward``): much
  cheaper than ``visit_Call`` when a rule only cares about a few methods;
* ``leave_loop(self, loop)``, ``leave_function(self, function)``,
  ``leave_class(self, cls)``, ``leave_module(self, module)``: deferred checks, called when
  the scope ends and everything inside it has been seen.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from torchdoctor._kernel import Reporter
from torchdoctor.findings import Confidence, Depth, Finding, Fix, Location, Severity
from torchdoctor.static.blocks import SCOPE_HOOKS
from torchdoctor.static.context import FileContext

__all__ = ["SCOPE_HOOKS", "LintRule", "line_numbers"]


class LintRule:
    """Base class of lint rules: per-file state plus :meth:`report` and :meth:`emit`.

    Class attributes a rule may set:
        requires: source substrings; the rule is skipped for a file containing none of
            them (a cheap pre-filter: a rule about ``.backward()`` requires ``"backward"``).
        call_names: last names of the callees :meth:`visit_call` wants.
        needs_structure: the rule reads loops/functions/items; implied by a scope hook.

    Attributes:
        ctx: the file being linted.
        codes: the codes the rule was registered with (``@detector``), set by the engine.
    """

    requires: ClassVar[tuple[str, ...]] = ()
    call_names: ClassVar[frozenset[str]] = frozenset()
    needs_structure: ClassVar[bool] = False
    codes: ClassVar[tuple[str, ...]] = ()

    def __init__(self, ctx: FileContext, sink: Callable[[Finding], None]) -> None:
        self.ctx = ctx
        # The engine hands a Reporter; a bare sink (a test's list.append) gets one here.
        self.reporter = (
            sink if isinstance(sink, Reporter) else Reporter(sink, Depth.LINT, self.codes)
        )

    def emit(self, item: Finding) -> None:
        """Hand over a finding already built (see :class:`~torchdoctor._kernel.Reporter`)."""
        self.reporter.emit(item)

    def report(
        self,
        where: ast.AST | Location,
        message: str,
        *,
        code: str | None = None,
        fix_hint: str = "",
        evidence: Mapping[str, Any] | None = None,
        confidence: Confidence = Confidence.HIGH,
        fix: Fix | None = None,
        severity: Severity | None = None,
    ) -> None:
        """Report one finding at a node (or an explicit location): :meth:`Reporter.report
        <torchdoctor._kernel.Reporter.report>` with the node's place in the file.

        ``code`` defaults to the rule's first registered code.
        """
        self.reporter.report(
            where if isinstance(where, Location) else self.ctx.location(where),
            message,
            code=code,
            fix_hint=fix_hint,
            evidence=evidence,
            confidence=confidence,
            fix=fix,
            severity=severity,
        )


def line_numbers(lines: list[int]) -> str:
    """``line 5`` or ``lines 5, 9``: the other places a finding names in its message."""
    return f"line{'s' * (len(lines) > 1)} {', '.join(str(line) for line in lines)}"
