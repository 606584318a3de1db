"""Running a script as `python script.py` would, under the monitor, however it ends."""

from __future__ import annotations

import io
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.needs_torch
pytest.importorskip("torch")

from torchdoctor.errors import UsageError  # noqa: E402
from torchdoctor.findings import Severity  # noqa: E402
from torchdoctor.runtime.script import run_script  # noqa: E402
from torchdoctor.runtime.status import StatusLine  # noqa: E402

TRAIN = """
import sys
import torch

def main():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(STEPS):
        optimizer.zero_grad()
        model(torch.randn(8, 4)).pow(2).mean().backward()
        optimizer.step()
    END

if __name__ == "__main__":
    main()
"""


def write(tmp_path: Path, end: str = "pass", steps: int = 5, prelude: str = "") -> Path:
    script = tmp_path / "train.py"
    script.write_text(
        prelude + TRAIN.replace("STEPS", str(steps)).replace("END", end), encoding="utf-8"
    )
    return script


def test_script_sees_argv_path_and_main(tmp_path: Path) -> None:
    (tmp_path / "helper.py").write_text("VALUE = 42\n", encoding="utf-8")
    prelude = textwrap.dedent("""
        import json, os, sys, helper
        json.dump({"argv": sys.argv, "path0": sys.path[0], "name": __name__,
                   "value": helper.VALUE}, open(os.environ["OUT"], "w"))
    """)
    out = tmp_path / "seen.json"
    import os

    os.environ["OUT"] = str(out)
    saved = sys.argv[:], sys.path[0]
    result = run_script(str(write(tmp_path, prelude=prelude)), ["--lr", "3", "--help"])
    import json

    seen = json.loads(out.read_text())
    assert seen["argv"][1:] == ["--lr", "3", "--help"]
    assert Path(seen["argv"][0]).name == "train.py"
    assert seen["path0"] == str(tmp_path.resolve()) and seen["name"] == "__main__"
    assert seen["value"] == 42
    assert result.exit_status == 0 and result.report.facts["steps"] == 5
    assert (sys.argv[:], sys.path[0]) == saved


@pytest.mark.parametrize(
    ("end", "status"), [("sys.exit(3)", 3), ("sys.exit()", 0), ("sys.exit('bad config')", 1)]
)
def test_sys_exit_status_passes_through(tmp_path: Path, end: str, status: int) -> None:
    result = run_script(str(write(tmp_path, end=end)))
    assert result.exit_status == status
    assert result.report.exit_status == status and result.report.facts["steps"] == 5


def test_exception_keeps_the_report_and_a_clean_traceback(tmp_path: Path, capsys) -> None:
    result = run_script(str(write(tmp_path, end="raise ValueError('bad batch')")))
    assert result.exit_status == 1
    assert result.report.facts["steps"] == 5
    err = capsys.readouterr().err
    assert "ValueError: bad batch" in err and "train.py" in err
    assert "runpy" not in err and "torchdoctor" not in err


def test_ctrl_c_keeps_the_report(tmp_path: Path) -> None:
    result = run_script(str(write(tmp_path, end="raise KeyboardInterrupt")))
    assert result.exit_status == 130 and result.report.facts["steps"] == 5


def test_max_steps_stops_early(tmp_path: Path) -> None:
    result = run_script(str(write(tmp_path, steps=50)), max_steps=4)
    assert result.stopped_early and result.exit_status == 0
    assert result.report.facts["steps"] == 4


def test_a_script_using_watch_itself_runs_under_torchdoctor_run(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(
        textwrap.dedent("""
        import torch
        import torchdoctor

        model = torch.nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        with torchdoctor.watch() as w:     # the run's monitor is already active
            for _ in range(5):
                model(torch.randn(8, 4)).pow(2).mean().backward()  # never cleared
                optimizer.step()
        print("inner report", sorted(w.report.codes()))
    """),
        encoding="utf-8",
    )
    result = run_script(str(script))
    assert result.exit_status == 0 and result.report.facts["steps"] == 5
    assert result.report.by_code("TD201")


def test_module_runs_like_python_dash_m(tmp_path: Path, monkeypatch) -> None:
    package = tmp_path / "project"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "train.py").write_text(
        TRAIN.replace("STEPS", "3").replace("END", "pass"), encoding="utf-8"
    )
    monkeypatch.chdir(tmp_path)
    result = run_script("project.train", module=True)
    assert result.exit_status == 0 and result.report.facts["steps"] == 3


def test_missing_script_or_module_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no such script"):
        run_script(str(tmp_path / "nope.py"))
    with pytest.raises(UsageError, match="no module named"):
        run_script("surely_not_a_module_xyz", module=True)


def test_findings_change_the_exit_code_only_with_fail_on(tmp_path: Path) -> None:
    uncleared = TRAIN.replace("        optimizer.zero_grad()\n", "")
    script = tmp_path / "train.py"
    script.write_text(uncleared.replace("STEPS", "20").replace("END", "pass"), encoding="utf-8")
    result = run_script(str(script))
    assert result.report.by_code("TD201")
    assert result.exit_code(None) == 0
    assert result.exit_code(Severity.ERROR) == 1
    failing = run_script(str(write(tmp_path, end="sys.exit(4)")))
    assert failing.exit_code(Severity.INFO) == 4  # the script's own failure wins


def test_findings_point_at_the_scripts_line_given_a_relative_path(
    tmp_path: Path, monkeypatch
) -> None:
    uncleared = TRAIN.replace("        optimizer.zero_grad()\n", "")
    script = tmp_path / "project" / "train.py"
    script.parent.mkdir()
    script.write_text(uncleared.replace("STEPS", "20").replace("END", "pass"), encoding="utf-8")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    location = run_script("../project/train.py").report.by_code("TD201")[0].location
    step_line = uncleared.splitlines().index("        optimizer.step()") + 1
    assert (location.path, location.line) == (str(script.resolve()), step_line)
    assert location.snippet == "        optimizer.step()"


def test_the_traceback_keeps_a_script_that_lives_among_our_files(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    # The demo script lives inside torchdoctor, whose frames the traceback leaves out.
    from torchdoctor.runtime import script as script_module

    monkeypatch.setattr(script_module, "_OWN_FILES", (*script_module._OWN_FILES, str(tmp_path)))
    result = run_script(str(write(tmp_path, end="raise ValueError('bad batch')")))
    assert result.exit_status == 1
    assert 'train.py", line' in capsys.readouterr().err


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_status_line_only_on_a_terminal() -> None:
    terminal, log = _Terminal(), io.StringIO()
    StatusLine(stream=terminal).update(1.0, 10, 0.5, 1)
    StatusLine(stream=log).update(1.0, 10, 0.5, 1)
    assert terminal.getvalue().startswith("\r") and "step 10" in terminal.getvalue()
    assert log.getvalue() == ""


def test_status_text_has_rate_loss_and_findings() -> None:
    line = StatusLine(enabled=True, stream=io.StringIO())
    line.update(0.0, 0, None, 0)
    assert line.text(2.0, 100, 0.25, 2) == (
        "torchdoctor: step 100 | loss 0.25 | 50.0 steps/s | 2 findings"
    )
