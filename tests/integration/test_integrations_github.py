"""The GitHub action: its shape, and its lint step's script run for real with bash."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[2]
BUGGY = """import torch

def train(model, loader, optimizer, criterion):
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
"""
CLEAN = """def add(a, b):
    return a + b
"""


def _action() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))


def _step(name: str) -> dict[str, Any]:
    return next(s for s in _action()["runs"]["steps"] if s["name"] == name)


def test_action_is_a_composite_that_lints_to_sarif_and_uploads_it() -> None:
    action = _action()
    assert action["runs"]["using"] == "composite"
    uses = [step.get("uses", "") for step in action["runs"]["steps"]]
    assert any(u.startswith("github/codeql-action/upload-sarif@") for u in uses)
    assert any(u.startswith("actions/setup-python@") for u in uses)
    lint = _step("Lint")["run"]
    assert "torchdoctor lint" in lint and "--format sarif" in lint
    assert set(action["inputs"]) >= {"paths", "fail-on", "version", "sarif-file", "args"}
    for step in action["runs"]["steps"]:  # inputs reach scripts through env, never inline
        assert "${{" not in step.get("run", ""), step["name"]


def _run_lint_step(
    tmp_path: Path, source: str, fail_on: str = "error"
) -> tuple[dict[str, str], Path, str]:
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("bash is not installed")
    (tmp_path / "train.py").write_text(source, encoding="utf-8")
    outputs = tmp_path / "github_output"
    outputs.write_text("", encoding="utf-8")
    step = _step("Lint")
    env = {
        **os.environ,
        "GITHUB_OUTPUT": str(outputs),
        "LINT_PATHS": "train.py",
        "LINT_ARGS": "--isolated",
        "SARIF_FILE": "out.sarif",
        "FAIL_ON": fail_on,
        "ANNOTATIONS": "true",
    }
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    done = subprocess.run(
        [bash, "-c", step["run"]],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    values = dict(line.split("=", 1) for line in outputs.read_text().splitlines() if line)
    return values, tmp_path / "out.sarif", done.stdout


@pytest.mark.slow
def test_lint_step_reports_findings_as_sarif_and_annotations(tmp_path: Path) -> None:
    if shutil.which("torchdoctor", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("the torchdoctor command is not installed next to this Python")
    outputs, sarif, printed = _run_lint_step(tmp_path, BUGGY)
    assert outputs["exit-code"] == "1"
    document = json.loads(sarif.read_text(encoding="utf-8"))
    assert document["version"] == "2.1.0"
    assert {r["ruleId"] for r in document["runs"][0]["results"]} == {"TD201"}
    assert "::error file=" in printed and "TD201" in printed


def test_lint_step_passes_clean_code(tmp_path: Path) -> None:
    if shutil.which("torchdoctor", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("the torchdoctor command is not installed next to this Python")
    outputs, sarif, printed = _run_lint_step(tmp_path, CLEAN)
    assert outputs["exit-code"] == "0"
    assert json.loads(sarif.read_text(encoding="utf-8"))["runs"][0]["results"] == []
    assert printed == ""


def test_docs_example_workflow_uses_the_action_with_its_inputs() -> None:
    text = (ROOT / "docs" / "github.md").read_text(encoding="utf-8")
    workflow = yaml.safe_load(re.search(r"```yaml\n(# \.github.*?)```", text, re.S).group(1))
    steps = workflow["jobs"]["lint"]["steps"]
    ours = next(s for s in steps if "torchdoctor/torchdoctor@" in s.get("uses", ""))
    assert set(ours["with"]) <= set(_action()["inputs"])
    assert workflow["permissions"]["security-events"] == "write"
