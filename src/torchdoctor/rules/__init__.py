"""The rule catalogue: codes, names, severities, docs, detector registration, selection."""

from __future__ import annotations

from torchdoctor.rules.detectors import DetectorInfo, detector, registered_detectors
from torchdoctor.rules.docs import RuleDoc, load_doc
from torchdoctor.rules.registry import RULES, Rule, Topic, UnknownRuleError, finding, get_rule
from torchdoctor.rules.selection import Selection

__all__ = [
    "RULES",
    "DetectorInfo",
    "Rule",
    "RuleDoc",
    "Selection",
    "Topic",
    "UnknownRuleError",
    "detector",
    "finding",
    "get_rule",
    "load_doc",
    "registered_detectors",
]
