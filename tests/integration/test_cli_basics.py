"""The catalogue commands and the CLI's error contract."""

from __future__ import annotations

import json

from click.testing import CliRunner

from torchdoctor.cli import main
from torchdoctor.rules.registry import RULES


def _invoke(*args: str):
    return CliRunner().invoke(main, list(args))


def test_rules_lists_every_active_rule() -> None:
    result = _invoke("rules")
    assert result.exit_code == 0
    for code, rule in RULES.items():
        assert f"{code}  {rule.name}" in result.output


def test_rules_select_by_prefix_and_json() -> None:
    result = _invoke("rules", "--select", "TD3", "--format", "json")
    assert result.exit_code == 0
    codes = {row["code"] for row in json.loads(result.output)}
    assert codes == {code for code in RULES if code.startswith("TD3")}


def test_explain_by_code_and_by_name() -> None:
    by_code = _invoke("explain", "td201")
    by_name = _invoke("explain", "grads-never-cleared")
    assert by_code.exit_code == 0
    assert by_code.output == by_name.output
    assert by_code.output.startswith("# TD201 grads-never-cleared")
    assert "## Detected by" in by_code.output


def test_unknown_rule_is_a_usage_error_with_a_suggestion() -> None:
    result = _invoke("explain", "grads-never-clear")
    assert result.exit_code == 2
    assert "grads-never-cleared" in result.output
    assert "Traceback" not in result.output


def test_version() -> None:
    result = _invoke("--version")
    assert result.exit_code == 0
    assert "torchdoctor" in result.output
