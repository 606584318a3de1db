"""The catalogue joins up: codes, docs, lab folders and detectors agree."""

from __future__ import annotations

import re

import pytest

from tests.conftest import HAS_TORCH, LAB
from torchdoctor.findings import Depth
from torchdoctor.rules.detectors import load_detector_modules, registered_detectors
from torchdoctor.rules.docs import SECTIONS, load_doc
from torchdoctor.rules.registry import RULES, Topic

ACTIVE = [r for r in RULES.values() if not r.removed]
USER_RULES = [r for r in ACTIVE if not r.meta]


def test_codes_are_well_formed_and_unique() -> None:
    names = [r.name for r in RULES.values()]
    assert len(names) == len(set(names))
    for code, rule in RULES.items():
        assert re.fullmatch(r"TD\d{3}", code)
        assert rule.code == code
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", rule.name)
        assert rule.depths, code
        assert isinstance(rule.topic, Topic)
        assert not rule.summary.endswith(".")


@pytest.mark.parametrize("rule", ACTIVE, ids=lambda r: r.code)
def test_every_rule_has_a_complete_doc(rule) -> None:
    doc = load_doc(rule.code)
    for heading in SECTIONS:
        assert doc.section(heading), f"{rule.code}: empty section {heading!r}"
    assert "```" in doc.section("Example"), f"{rule.code}: the example has no code block"
    rendered = doc.to_markdown()
    assert rendered.startswith(f"# {rule.code} {rule.name}")
    assert "## Detected by" in rendered


@pytest.mark.parametrize("rule", USER_RULES, ids=lambda r: r.code)
def test_every_rule_has_a_lab_pair(rule) -> None:
    folder = LAB / rule.slug
    assert (folder / "buggy.py").is_file(), f"missing {folder}/buggy.py"
    assert (folder / "fixed.py").is_file(), f"missing {folder}/fixed.py"


def test_every_lab_folder_and_doc_belongs_to_a_rule() -> None:
    slugs = {r.slug for r in USER_RULES}
    stray = [p.name for p in LAB.iterdir() if p.is_dir() and p.name not in slugs]
    assert not stray, f"lab folders without a rule (or with a wrong name): {stray}"
    from importlib import resources

    docs = resources.files("torchdoctor.rules").joinpath("docs")
    codes = {p.name.removesuffix(".md") for p in docs.iterdir() if p.name.endswith(".md")}
    assert codes <= set(RULES), f"docs without a rule: {sorted(codes - set(RULES))}"


@pytest.mark.needs_torch
@pytest.mark.skipif(not HAS_TORCH, reason="needs PyTorch")
def test_catalogued_depths_match_registered_detectors() -> None:
    load_detector_modules()
    seen: dict[str, set[Depth]] = {}
    for info in registered_detectors():
        for code in info.codes:
            seen.setdefault(code, set()).add(info.depth)
    problems = []
    for rule in USER_RULES:
        if set(rule.depths) != seen.get(rule.code, set()):
            problems.append(
                f"{rule.code}: catalogue says {sorted(d.value for d in rule.depths)}, "
                f"detectors at {sorted(d.value for d in seen.get(rule.code, set()))}"
            )
    assert not problems, "\n".join(problems)
