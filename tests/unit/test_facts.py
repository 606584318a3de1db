"""Report facts are declared once (torchdoctor.facts): writes are checked, readers get the
declared type or nothing."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

import torchdoctor
from torchdoctor.facts import FACTS, FORECAST, STEPS, SUMMARY, FactError, Facts
from torchdoctor.findings import Report
from torchdoctor.report.json import render_json, report_from_json
from torchdoctor.report.options import RenderOptions

SOURCE = Path(torchdoctor.__file__).parent


def test_an_undeclared_key_is_an_error_that_says_where_to_declare_it() -> None:
    report = Report()
    with pytest.raises(FactError, match=r"'stepz' is not declared.*torchdoctor/facts.py"):
        report.facts["stepz"] = 3


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("steps", "3"),
        ("steps", True),
        ("watched", 4),
        ("summary", [{"module": "m", "depth": "deep"}]),
        ("summary", [{"module": "m", "colour": "red"}]),
        ("forecast", [3]),
    ],
)
def test_a_value_of_the_wrong_type_is_an_error_on_every_way_of_writing(
    key: str, value: object
) -> None:
    with pytest.raises(FactError, match=repr(key)):
        Report().facts[key] = value
    with pytest.raises(FactError):
        Report().facts.update({key: value})
    with pytest.raises(FactError):
        Report().facts.setdefault(key, value)
    with pytest.raises(FactError):
        Report(facts={key: value})


def test_declared_values_are_taken_and_json_keeps_its_shape() -> None:
    report = Report(command="run", facts={"steps": 3, "duration_s": 1.5})
    report.facts["models"] = [{"name": "Net", "parameters": 10, "trainable": 10}]
    report.facts.setdefault("world_size", 2)
    assert isinstance(report.facts, Facts)
    data = json.loads(render_json(report, RenderOptions()))
    assert data["facts"] == {
        "steps": 3,
        "duration_s": 1.5,
        "models": [{"name": "Net", "parameters": 10, "trainable": 10}],
        "world_size": 2,
    }
    assert report_from_json(render_json(report, RenderOptions())).facts == report.facts


def test_outside_strict_mode_a_slip_keeps_the_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHDOCTOR_STRICT_FACTS", "0")
    report = Report()
    report.facts["stepz"] = "x"  # a user's run never loses its report to our slip
    assert report.facts["stepz"] == "x"


def test_readers_get_the_declared_type_or_nothing() -> None:
    read_back = Facts.unchecked({"steps": "many", "summary": [1, {"module": "m"}]})
    assert STEPS.get(read_back) is None
    assert SUMMARY.get(read_back) == [{"module": "m"}]  # records only
    assert FORECAST.get(read_back) is None
    assert STEPS.get(Facts({"steps": 4})) == 4


def _written_keys() -> set[tuple[str, str]]:
    """(module, key) for every literal key written as ``facts["key"] = ...``,
    ``facts.setdefault("key", ...)`` or ``set_fact("key", ...)`` in the package."""
    found = set()
    for path in SOURCE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            key = None
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if (
                        isinstance(target, ast.Subscript)
                        and isinstance(target.value, (ast.Attribute, ast.Name))
                        and getattr(target.value, "attr", getattr(target.value, "id", ""))
                        == "facts"
                        and isinstance(target.slice, ast.Constant)
                    ):
                        key = target.slice.value
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                name = node.func.attr
                owner = node.func.value
                owner_name = getattr(owner, "attr", getattr(owner, "id", ""))
                if (name == "set_fact" or (name == "setdefault" and owner_name == "facts")) and (
                    node.args and isinstance(node.args[0], ast.Constant)
                ):
                    key = node.args[0].value
            if isinstance(key, str):
                found.add((str(path.relative_to(SOURCE)), key))
    return found


def test_every_key_the_package_writes_is_declared() -> None:
    written = _written_keys()
    assert ("runtime/facts.py", "steps") in written  # the scan sees the writes
    undeclared = sorted((module, key) for module, key in written if key not in FACTS)
    assert not undeclared, f"declare these in torchdoctor/facts.py: {undeclared}"
