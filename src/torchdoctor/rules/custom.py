"""Users' own rules (``TDX`` codes): their record, and how a detector's codes are read.

The catalogue floor's half of :mod:`torchdoctor.custom` (the user-facing guide): the
depths' engines ask :func:`declared_codes` of a user's detector or probe without
importing the base classes those subclass.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from torchdoctor.errors import UsageError
from torchdoctor.findings import Depth, Severity
from torchdoctor.rules.registry import Rule, get_rule, register_custom_rule

__all__ = ["CUSTOM_CODE", "CustomRule", "declared_codes", "register_rules"]

# The reserved range of user codes.
CUSTOM_CODE = re.compile(r"^TDX\d{3}$")
_NAME = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")


@dataclass(frozen=True, slots=True)
class CustomRule:
    """A rule of your own: what a user-written detector reports.

    Attributes:
        code: ``TDX`` plus three digits.
        name: kebab-case name of the problem (``loss-over-budget``).
        severity: default severity of its findings.
        summary: one line saying the problem.
    """

    code: str
    name: str
    severity: Severity
    summary: str

    def __post_init__(self) -> None:
        if not CUSTOM_CODE.match(self.code):
            raise UsageError(
                f"custom rule code {self.code!r}: use TDX plus three digits "
                "(TDX001); TD plus digits is torchdoctor's own catalogue"
            )
        if not _NAME.match(self.name):
            raise UsageError(f"custom rule {self.code} name {self.name!r}: use kebab-case")
        if not self.summary.strip():
            raise UsageError(f"custom rule {self.code} needs a one-line summary")


def register_rules(rules: Iterable[CustomRule], depth: Depth) -> None:
    """Make custom rules known to the catalogue look-ups (idempotent for equal rules).

    Raises:
        UsageError: a code already declared with another name, severity or summary.
    """
    for rule in rules:
        if not isinstance(rule, CustomRule):
            raise UsageError(f"rules must be CustomRule records, got {type(rule).__name__}")
        register_custom_rule(
            Rule(rule.code, rule.name, rule.severity, frozenset({depth}), rule.summary)
        )


def declared_codes(owner: Any, depth: Depth) -> tuple[str, ...]:
    """The codes a user detector or probe reports, its custom rules registered.

    Raises:
        UsageError: it declares no code, or a catalogued code that does not exist.
    """
    rules: Sequence[CustomRule] = tuple(getattr(owner, "rules", ()))
    register_rules(rules, depth)
    codes = tuple(getattr(owner, "codes", ()))
    for code in codes:
        get_rule(code)  # UnknownRuleError (a UsageError's sibling) for a typo
    declared = (*codes, *(rule.code for rule in rules))
    if not declared:
        raise UsageError(
            f"{type(owner).__name__} declares no rule: list CustomRule records "
            "in `rules` (or catalogued codes in `codes`)"
        )
    return declared
