"""The one look-up every renderer uses to name a finding's rule.

A code is found in torchdoctor's catalogue or among the user's own rules (``TDX`` codes
declared by a custom detector or probe, :mod:`torchdoctor.custom`); any other code (a
report read back from JSON written by another version, say) has no rule, and renderers
show the bare code.
"""

from __future__ import annotations

from torchdoctor.errors import UnknownRuleError
from torchdoctor.rules.registry import Rule, get_rule

__all__ = ["rule_for"]


def rule_for(code: str) -> Rule | None:
    """The catalogued rule for ``code``, a user's declared ``TDX`` rule, or ``None``."""
    try:
        return get_rule(code)
    except UnknownRuleError:
        return None
