"""`torchdoctor lint` end to end: output formats, exit codes, options, fixes, no torch."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from xml.etree import ElementTree

import pytest
from click.testing import CliRunner

from torchdoctor.cli import main

BUGGY = """\
import torch
def train(model, loader, optimizer):
    for x, y in loader:
        model(x).sum().backward()
        optimizer.step()
"""
CLEAN = """\
import torch
def train(model, loader, optimizer):
    for x, y in loader:
        optimizer.zero_grad()
        model(x).sum().backward()
        optimizer.step()
"""
# A hook is attached, so skipping it through `forward()` is a warning (without one, info).
FORWARD = """\
from torch import nn
model = nn.Linear(2, 2)
out = model.forward(x)
model.register_forward_hook(print)
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty project folder that is the working directory."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("[tool.torchdoctor]\n", encoding="utf-8")
    return tmp_path


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["lint", *args])
    return result.exit_code, result.stdout, result.stderr


def test_default_output_is_one_line_per_finding_and_exit_1(project: Path) -> None:
    (project / "train.py").write_text(BUGGY, encoding="utf-8")
    code, out, _ = run("train.py")
    assert code == 1
    assert out.startswith("train.py:5:9: TD201 [*] `optimizer.step()` at line 5")


def test_clean_code_exits_0_with_no_output(project: Path) -> None:
    (project / "train.py").write_text(CLEAN, encoding="utf-8")
    assert run("train.py") == (0, "", "")


def test_folder_default_is_the_working_directory(project: Path) -> None:
    (project / "pkg").mkdir()
    (project / "pkg" / "train.py").write_text(BUGGY, encoding="utf-8")
    code, out, _ = run()
    assert code == 1 and out.startswith("pkg/train.py:5:9: TD201")


@pytest.mark.parametrize("fail_on, expected", [("error", 0), ("warning", 1), ("never", 0)])
def test_fail_on_thresholds(project: Path, fail_on: str, expected: int) -> None:
    (project / "net.py").write_text(FORWARD, encoding="utf-8")  # TD206 is a warning
    assert run("net.py", "--fail-on", fail_on)[0] == expected


def test_select_ignore_and_noqa(project: Path) -> None:
    (project / "train.py").write_text(BUGGY, encoding="utf-8")
    assert run("train.py", "--ignore", "TD201")[0] == 0
    assert run("train.py", "--select", "TD5")[0] == 0
    (project / "train.py").write_text(
        BUGGY.replace("step()", "step()  # noqa: TD201"), encoding="utf-8"
    )
    assert run("train.py")[0] == 0


@pytest.mark.parametrize("fmt", ["json", "sarif", "github", "text", "concise", "junit"])
def test_every_format_renders(project: Path, fmt: str) -> None:
    (project / "train.py").write_text(BUGGY, encoding="utf-8")
    code, out, _ = run("train.py", "--format", fmt)
    assert code == 1 and "TD201" in out
    if fmt in ("json", "sarif"):
        json.loads(out)
    if fmt == "junit":
        [case] = ElementTree.fromstring(out).iter("testcase")
        assert case.get("file", "").endswith("train.py") and case.find("failure") is not None


def test_sarif_paths_are_repo_relative(project: Path) -> None:
    (project / "src").mkdir()
    (project / "src" / "train.py").write_text(BUGGY, encoding="utf-8")
    _, out, _ = run(str(project / "src"), "--format", "sarif")
    result = json.loads(out)["runs"][0]["results"][0]
    assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "src/train.py"


def test_statistics(project: Path) -> None:
    (project / "a.py").write_text(BUGGY, encoding="utf-8")
    (project / "b.py").write_text(BUGGY + FORWARD, encoding="utf-8")
    code, out, _ = run(".", "--statistics")
    assert code == 1
    assert out.splitlines() == [
        "2  TD201  [*] grads-never-cleared",
        "1  TD206  [*] forward-called-directly",
    ]


def test_output_file(project: Path) -> None:
    (project / "train.py").write_text(BUGGY, encoding="utf-8")
    code, out, _ = run("train.py", "--format", "json", "-o", "report.json")
    assert code == 1 and out == ""
    data = json.loads((project / "report.json").read_text(encoding="utf-8"))
    assert [f["code"] for f in data["findings"]] == ["TD201"]


def test_baseline_fails_only_on_new_findings(project: Path) -> None:
    (project / "train.py").write_text(BUGGY, encoding="utf-8")
    run("train.py", "--format", "json", "-o", "baseline.json")
    (project / "train.py").write_text("# moved down\n" + BUGGY, encoding="utf-8")
    assert run("train.py", "--baseline", "baseline.json") == (0, "", "")
    (project / "other.py").write_text(FORWARD, encoding="utf-8")
    code, out, _ = run(".", "--baseline", "baseline.json", "--fail-on", "warning")
    assert code == 1 and out.startswith("other.py:3:7: TD206")


def test_diff_writes_nothing_and_fix_applies_unsafe_only_when_asked(project: Path) -> None:
    path = project / "net.py"
    path.write_text(FORWARD, encoding="utf-8")
    assert run("net.py", "--diff")[0] == 0  # TD206's fix is unsafe: nothing to show
    code, out, _ = run("net.py", "--diff", "--unsafe-fixes")
    assert code == 1 and "+out = model(x)" in out and path.read_text() == FORWARD
    code, out, err = run("net.py", "--fix", "--unsafe-fixes")
    assert code == 0 and out == "" and "applied 1 fix(es) in 1 file(s)" in err
    assert path.read_text(encoding="utf-8") == FORWARD.replace("model.forward(x)", "model(x)")
    assert run("net.py", "--fix", "--unsafe-fixes")[2].startswith("torchdoctor: applied 0 fix(es)")


def test_usage_errors_exit_2(project: Path) -> None:
    code, _, err = run("missing.py")
    assert code == 2 and "no such file or directory: missing.py" in err
    assert run("--unsafe-fixes", ".")[0] == 2
    (project / "pyproject.toml").write_text("[tool.torchdoctor]\nselect = 1\n")
    assert run(".")[0] == 2
    assert run(".", "--isolated")[0] == 0


def test_syntax_error_is_a_finding_not_a_crash(project: Path) -> None:
    (project / "broken.py").write_text("def f(:\n", encoding="utf-8")
    (project / "binary.py").write_bytes(b"\x00\x01\x02")
    code, out, err = run(".")
    assert code == 1 and err == ""
    assert "binary.py:1:1: TD002" in out and "broken.py:1:7: TD002" in out


def test_internal_error_in_a_rule_exits_2(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from torchdoctor.static import engine
    from torchdoctor.static.rules.base import LintRule

    class Broken(LintRule):
        def visit_Module(self, node: object) -> None:
            raise RuntimeError("bug")

    monkeypatch.setattr(engine, "_SPECS", [*engine.rule_specs(), engine._spec(Broken, ("TD206",))])
    (project / "train.py").write_text(CLEAN, encoding="utf-8")
    code, out, _ = run("train.py", "--jobs", "1")
    assert code == 2 and "TD001" in out and "Broken" in out


def _broken_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    from torchdoctor.static import engine
    from torchdoctor.static.rules.base import LintRule

    class Broken(LintRule):
        def visit_Module(self, node: object) -> None:
            self.explode()

        def explode(self) -> None:
            raise RuntimeError("bug in a rule")

    monkeypatch.setattr(engine, "_SPECS", [*engine.rule_specs(), engine._spec(Broken, ("TD206",))])


def test_debug_prints_the_traceback_of_a_crashed_rule(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _broken_rule(monkeypatch)
    (project / "train.py").write_text(CLEAN, encoding="utf-8")
    result = CliRunner().invoke(main, ["--debug", "lint", "train.py", "--jobs", "1"])
    assert result.exit_code == 2 and "TD001" in result.stdout
    assert "Traceback (most recent call last)" in result.stderr
    assert "in explode" in result.stderr and "RuntimeError: bug in a rule" in result.stderr
    assert "Traceback" not in result.stdout


@pytest.mark.parametrize("fmt", ["concise", "json"])
def test_traceback_of_a_crashed_rule_only_under_debug(
    project: Path, fmt: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _broken_rule(monkeypatch)
    (project / "train.py").write_text(CLEAN, encoding="utf-8")
    code, out, err = run("train.py", "--jobs", "1", "--format", fmt)
    assert code == 2 and "TD001" in out
    assert "Traceback" not in out and "Traceback" not in err and "in explode" not in out
    if fmt == "json":
        (found,) = json.loads(out)["findings"]
        assert found["evidence"]["exception"] == "RuntimeError"
        assert "traceback" not in found["evidence"]


def test_debug_shows_the_traceback_with_diff_too(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _broken_rule(monkeypatch)
    (project / "net.py").write_text(FORWARD, encoding="utf-8")
    result = CliRunner().invoke(
        main, ["--debug", "lint", "net.py", "--jobs", "1", "--diff", "--unsafe-fixes"]
    )
    assert "RuntimeError: bug in a rule" in result.stderr
    assert "+out = model(x)" in result.stdout


def _lab_copies(root: Path) -> dict[Path, str]:
    """Every lab ``buggy.py``, copied to ``root/<lab folder>/buggy.py``."""
    lab = Path(__file__).resolve().parents[2] / "examples" / "lab"
    copies = {}
    for buggy in sorted(lab.glob("*/buggy.py")):
        copy = root / buggy.parent.name / "buggy.py"
        copy.parent.mkdir(parents=True)
        text = buggy.read_text(encoding="utf-8")
        copy.write_text(text, encoding="utf-8")
        copies[copy] = text
    return copies


def _parses(text: str) -> bool:
    try:
        compile(text, "<fixed>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return False
    return True


@pytest.mark.slow
def test_every_fix_on_the_lab_is_idempotent_and_keeps_the_code_valid(tmp_path: Path) -> None:
    copies = _lab_copies(tmp_path / "lab")
    fix_all = [
        "lint",
        "--isolated",
        "--jobs",
        "1",
        "--fix",
        "--unsafe-fixes",
        str(tmp_path / "lab"),
    ]
    first = CliRunner().invoke(main, fix_all)
    assert first.exit_code in (0, 1), first.stderr
    assert "applied 0 fix(es)" not in first.stderr  # the lab has fixable findings
    after_first = {path: path.read_text(encoding="utf-8") for path in copies}
    second = CliRunner().invoke(main, fix_all)
    assert "applied 0 fix(es) in 0 file(s)" in second.stderr
    changed = [
        path.parent.name for path in copies if path.read_text(encoding="utf-8") != after_first[path]
    ]
    assert not changed, f"a second --fix changed {changed}"
    broken = [
        path.parent.name
        for path, text in after_first.items()
        if _parses(copies[path]) and not _parses(text)
    ]
    assert not broken, f"--fix left invalid Python in {broken}"
    diff = CliRunner().invoke(
        main, [*fix_all[:4], "--diff", "--unsafe-fixes", str(tmp_path / "lab")]
    )
    assert diff.exit_code == 0 and diff.stdout == ""


def test_many_files_in_parallel_give_the_same_report(project: Path) -> None:
    for index in range(60):
        (project / f"m{index:02d}.py").write_text(BUGGY if index % 3 else CLEAN, encoding="utf-8")
    serial = run(".", "--jobs", "1", "--format", "json")[1]
    parallel = run(".", "--jobs", "2", "--format", "json")[1]

    def findings(text: str) -> list:
        return json.loads(text)["findings"]

    assert findings(serial) == findings(parallel) and len(findings(serial)) == 40


_BLOCK_TORCH = textwrap.dedent("""
    import sys
    class _Block:
        def find_spec(self, name, path=None, target=None):
            if name == "torch" or name.startswith("torch.") or name == "numpy":
                raise ImportError(f"blocked {name}")
            return None
    sys.meta_path.insert(0, _Block())
    from torchdoctor.cli import main
    try:
        main(["lint", *sys.argv[1:]], standalone_mode=False)
    finally:
        assert "torch" not in sys.modules
""")


def test_lint_runs_without_torch(project: Path) -> None:
    (project / "train.py").write_text(BUGGY, encoding="utf-8")
    for fmt in ("concise", "json", "sarif", "github", "text"):
        result = subprocess.run(
            [sys.executable, "-c", _BLOCK_TORCH, "train.py", "--format", fmt],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=project,
        )
        assert "TD201" in result.stdout, result.stderr
