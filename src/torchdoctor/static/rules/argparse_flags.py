"""Command-line flags that cannot be turned off: TD913 argparse-type-bool.

``parser.add_argument("--eval", type=bool, default=True)`` hands the command-line text to
``bool()``, and every non-empty string is true, ``"False"`` and ``"0"`` included: ``--eval
False`` turns the option on. With ``default=True`` the option cannot be switched off at
all, so a run asked to skip pre-training, evaluation or augmentation silently does it
anyway (a warning); with a false default, ``--flag True`` works and only ``--flag False``
misleads (information).
"""

from __future__ import annotations

import ast

from torchdoctor.findings import Depth, Severity
from torchdoctor.rules.detectors import detector
from torchdoctor.static.analysis.calls import keyword
from torchdoctor.static.rules.base import LintRule


@detector("TD913", depth=Depth.LINT)
class ArgparseTypeBool(LintRule):
    """``add_argument(..., type=bool)``: any text given on the command line is true."""

    requires = ("bool",)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if not (isinstance(func, ast.Attribute) and func.attr == "add_argument"):
            return
        given = keyword(node, "type")
        if not (isinstance(given, ast.keyword) and isinstance(given.value, ast.Name)):
            return
        if given.value.id != "bool" or "bool" in self.ctx.imports:
            return
        flag = next(
            (
                a.value
                for a in node.args
                if isinstance(a, ast.Constant) and isinstance(a.value, str)
            ),
            "the option",
        )
        default = keyword(node, "default")
        on = (
            default is not None
            and isinstance(default.value, ast.Constant)
            and bool(default.value.value)
        )
        effect = (
            f"with `default=True`, `{flag}` cannot be turned off from the command line: "
            f"`{flag} False` leaves it on"
            if on
            else f"`{flag} False` turns it on"
        )
        self.report(
            given.value,
            f"`{flag}` is declared with `type=bool` at line {node.lineno}: argparse passes "
            "the command-line text to `bool()`, and every non-empty string is true, "
            f'"False" and "0" included, so {effect}',
            fix_hint='Use `action="store_true"` (or `action=argparse.BooleanOptionalAction` '
            "for `--flag`/`--no-flag`), or a converter that reads the text "
            '(`type=lambda s: s.lower() in ("1", "true", "yes")`).',
            severity=None if on else Severity.INFO,
        )
