"""Findings in test code are info, saying why (static.severity_in_tests), and can be kept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from torchdoctor.cli import main
from torchdoctor.errors import UsageError
from torchdoctor.findings import Finding, Severity
from torchdoctor.report import render
from torchdoctor.rules.selection import Selection
from torchdoctor.static import LintConfig, lint, lint_source
from torchdoctor.static.config import load_config
from torchdoctor.static.runner import lint_sources

LAB = Path(__file__).resolve().parents[3] / "examples" / "lab"
# A training loop without zero_grad(): TD201, an error in a training program.
LOOP = """\
import torch

def {name}():
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        model(torch.randn(4, 2)).sum().backward()
        optimizer.step()
"""
SMOKE_TEST = LOOP.format(name="test_trains")
SCRIPT = LOOP.format(name="main")
# An evaluation entry point: validation without model.eval() (TD501) is a wrong metric.
EVALUATION = (LAB / "TD501-eval-in-train-mode" / "buggy.py").read_text(encoding="utf-8")
UNGUARDED_WORKERS = (LAB / "TD405-dataloader-workers-without-main-guard" / "buggy.py").read_text(
    encoding="utf-8"
)


def severities(source: str, path: str, code: str = "TD201", **options: bool) -> list[str]:
    found = lint_source(source, path, select=[code], **options).findings
    assert found, f"{code} did not fire on {path}"
    return [f.severity.value for f in found]


def td201(report_findings: list[Finding], name: str) -> Finding:
    (found,) = [
        f for f in report_findings if f.code == "TD201" and Path(f.location.path or "").name == name
    ]
    return found


def test_a_finding_in_a_tests_folder_is_info_and_says_why() -> None:
    (found,) = lint_source(SMOKE_TEST, "tests/test_x.py", select=["TD201"]).findings
    assert found.severity is Severity.INFO
    assert "[info in test code (in a `tests/` folder); error elsewhere]" in found.message
    assert found.evidence["lowered_from"] == "error"
    assert found.evidence["test_code"] == "in a `tests/` folder"


def test_the_same_code_in_a_training_script_keeps_its_severity() -> None:
    (found,) = lint_source(SCRIPT, "train.py", select=["TD201"]).findings
    assert found.severity is Severity.ERROR
    assert "test code" not in found.message and "lowered_from" not in found.evidence


@pytest.mark.parametrize(
    "path",
    [
        "test/smoke.py",  # any file in a test folder, tests or not
        "pkg/testing/helpers.py",
        "conftest.py",
        "tests/conftest.py",
    ],
)
def test_test_folders_and_conftest_are_test_code(path: str) -> None:
    assert severities(SCRIPT, path) == ["info"]


@pytest.mark.parametrize("path", ["test_models.py", "models_test.py", "src/test_loss.py"])
def test_a_test_named_module_with_tests_is_test_code(path: str) -> None:
    assert severities(SMOKE_TEST, path) == ["info"]


@pytest.mark.parametrize("path", ["test.py", "test_net.py", "eval_test.py", "tools/test.py"])
def test_an_evaluation_script_named_test_keeps_its_severity(path: str) -> None:
    # test.py, or a test_*.py that defines no test: the project's evaluation entry point,
    # where a broken metric is a real bug.
    assert severities(EVALUATION, path, "TD501") == ["error"]
    assert severities(SCRIPT, path) == ["error"]


@pytest.mark.parametrize(
    "header",
    [
        "import pytest\n",
        "from pytest import approx\n",
        "try:\n    import pytest\nexcept ImportError:\n    pytest = None\n",
        "import unittest\nclass Smoke(unittest.TestCase):\n    pass\n",
        "from torch.testing._internal.common_utils import TestCase\nclass T(TestCase):\n    pass\n",
    ],
)
def test_a_pytest_or_unittest_module_is_test_code_whatever_its_name(header: str) -> None:
    assert severities(header + SCRIPT, "check_model.py") == ["info"]


@pytest.mark.parametrize(
    "header",
    [
        "from unittest import mock\n",
        "from sklearn.model_selection import train_test_split\n",
        "def train_test_split(data):\n    return data[:8], data[8:]\n",
        "def test(model, loader):\n    return 0.0\n",  # the evaluation function of a script
    ],
)
def test_mocks_splits_and_test_functions_of_a_script_are_not_test_code(header: str) -> None:
    # train_test.py has a test-like name, but defines no test: a training script.
    assert severities(header + SCRIPT, "train_test.py" if "split" in header else "train.py") == [
        "error"
    ]


def test_folders_above_the_project_do_not_make_it_test_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "elsewhere"  # the current folder holds none of it
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    project = tmp_path / "tests" / "proj"  # a checkout that happens to live under tests/
    (project / "tests").mkdir(parents=True)
    (project / "train.py").write_text(SCRIPT, encoding="utf-8")
    (project / "tests" / "test_x.py").write_text(SMOKE_TEST, encoding="utf-8")
    found = lint(project, config=LintConfig(), jobs=1).findings
    assert td201(found, "train.py").severity is Severity.ERROR
    assert td201(found, "test_x.py").severity is Severity.INFO
    # The same from the configuration's root.
    (project / "pyproject.toml").write_text("[tool.torchdoctor]\n", encoding="utf-8")
    found = lint(project, jobs=1).findings
    assert td201(found, "train.py").severity is Severity.ERROR
    assert td201(found, "test_x.py").severity is Severity.INFO
    # A file named on its own, outside the root: its name alone.
    (only,) = lint(project / "train.py", config=LintConfig(), jobs=1).by_code("TD201")
    assert only.severity is Severity.ERROR


def test_a_tests_folder_linted_by_itself_is_test_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tests = tmp_path / "proj" / "tests"
    tests.mkdir(parents=True)
    (tests / "smoke.py").write_text(SCRIPT, encoding="utf-8")  # no test in it: its folder
    (found,) = lint(tests, config=LintConfig(), jobs=1).by_code("TD201")
    assert found.severity is Severity.INFO
    monkeypatch.chdir(tests)  # the folder given is the current one
    (found,) = lint(".", config=LintConfig(), jobs=1).by_code("TD201")
    assert found.severity is Severity.INFO


def test_files_linted_from_memory_are_read_from_their_common_folder() -> None:
    sources = [("/x/tests/proj/train.py", SCRIPT), ("/x/tests/proj/tests/test_x.py", SMOKE_TEST)]
    found = lint_sources(sources, Selection.from_options(["TD201"]))
    assert [(Path(f.location.path or "").name, f.severity.value) for f in found] == [
        ("train.py", "error"),
        ("test_x.py", "info"),
    ]
    kept = lint_sources(sources, Selection.from_options(["TD201"]), test_code_as_info=False)
    assert [f.severity.value for f in kept] == ["error", "error"]


def test_workers_without_a_main_guard_keep_their_severity_in_tests() -> None:
    # The one claim a test's own Linux runs never show: under spawn it cannot start.
    assert severities(UNGUARDED_WORKERS, "tests/test_loader.py", "TD405") == ["error"]


def test_info_findings_are_left_as_they_are() -> None:
    source = "import torch\nscaler = torch.cuda.amp.GradScaler()\n"
    (found,) = lint_source(source, "tests/test_amp.py", select=["TD611"]).findings
    assert found.severity is Severity.INFO and "test code" not in found.message


def test_it_can_be_turned_off_from_the_api_and_the_config(tmp_path: Path) -> None:
    assert severities(SMOKE_TEST, "tests/test_x.py", test_code_as_info=False) == ["error"]
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text(SMOKE_TEST, encoding="utf-8")
    off = LintConfig(test_code_as_info=False)
    assert [f.severity for f in lint(tmp_path, config=off, jobs=1)] == [Severity.ERROR]
    assert [f.severity for f in lint(tmp_path, config=off, jobs=1, test_code_as_info=True)] == [
        Severity.INFO
    ]
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text("[tool.torchdoctor]\ntest-code-as-info = false\n", encoding="utf-8")
    assert load_config(pyproject).test_code_as_info is False
    assert [f.severity for f in lint(tmp_path, jobs=1)] == [Severity.ERROR]
    pyproject.write_text('[tool.torchdoctor]\ntest-code-as-info = "no"\n', encoding="utf-8")
    with pytest.raises(UsageError, match="test-code-as-info must be true or false"):
        load_config(pyproject)


def test_the_cli_flag_turns_it_off_and_on(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text(SMOKE_TEST, encoding="utf-8")
    runner = CliRunner()

    def lint_cli(*options: str) -> tuple[int, list[str]]:
        result = runner.invoke(main, ["lint", str(tmp_path), "--format", "json", *options])
        return result.exit_code, [f["severity"] for f in json.loads(result.output)["findings"]]

    assert lint_cli() == (0, ["info"])  # info does not fail the run
    assert lint_cli("--no-test-code-as-info") == (1, ["error"])
    (tmp_path / "pyproject.toml").write_text(
        "[tool.torchdoctor]\ntest-code-as-info = false\n", encoding="utf-8"
    )
    assert lint_cli() == (1, ["error"])
    assert lint_cli("--test-code-as-info") == (0, ["info"])
    assert "--no-test-code-as-info" in runner.invoke(main, ["lint", "--help"]).output


def test_reports_show_the_lowered_severity_and_the_reason() -> None:
    report = lint_source(SMOKE_TEST, "tests/test_x.py", select=["TD201"])
    reason = "info in test code (in a `tests/` folder); error elsewhere"
    (item,) = json.loads(render(report, "json"))["findings"]
    assert item["severity"] == "info" and reason in item["message"]
    assert item["evidence"]["lowered_from"] == "error"
    assert item["evidence"]["test_code"] == "in a `tests/` folder"
    (result,) = json.loads(render(report, "sarif"))["runs"][0]["results"]
    assert result["level"] == "note" and reason in result["message"]["text"]
    text = render(report, "text")
    assert "1 info" in text and "test code" in text and "lowered_from=error" in text
    assert reason in render(report, "concise")


def test_the_policy_is_documented_where_the_config_is() -> None:
    from torchdoctor.static import config

    assert "test-code-as-info" in (config.__doc__ or "")
