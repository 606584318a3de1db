"""`torchdoctor run` end to end, in a fresh process, as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.integration.terminal import as_from_a_terminal

pytestmark = [pytest.mark.needs_torch, pytest.mark.slow]

TRAIN = textwrap.dedent("""
    import os, signal, sys
    import torch

    class Squares(torch.utils.data.Dataset):   # defined in __main__: spawn must re-import it
        def __len__(self):
            return 64
        def __getitem__(self, index):
            x = torch.full((4,), float(index % 7))
            return x, x.sum(dim=0, keepdim=True)

    def main():
        print("argv", sys.argv[1:])
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
        loader = torch.utils.data.DataLoader(
            Squares(), batch_size=8, num_workers=WORKERS,
            multiprocessing_context=CONTEXT if WORKERS else None)
        for step, (x, y) in enumerate(loader):
            CLEAR
            torch.nn.functional.mse_loss(model(x), y).backward()
            optimizer.step()
            if step == 3:
                END
        print("finished")

    if __name__ == "__main__":
        main()
""")


def script(
    tmp_path: Path,
    *,
    end: str = "pass",
    clear: bool = True,
    workers: int = 0,
    context: str = "fork",
) -> Path:
    path = tmp_path / "train.py"
    path.write_text(
        TRAIN.replace("END", end)
        .replace("WORKERS", str(workers))
        .replace("CONTEXT", repr(context))
        .replace("CLEAR", "optimizer.zero_grad()" if clear else "pass"),
        encoding="utf-8",
    )
    return path


def torchdoctor(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        as_from_a_terminal([sys.executable, "-m", "torchdoctor.cli", *args]),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def test_arguments_after_the_script_are_the_scripts_and_its_status_passes(tmp_path) -> None:
    script(tmp_path, end="sys.exit(3)")
    result = torchdoctor(
        "run", "--no-status", "train.py", "--help", "--max-steps", "1", cwd=tmp_path
    )
    assert "argv ['--help', '--max-steps', '1']" in result.stdout
    assert result.returncode == 3, result.stderr
    assert "torchdoctor run train.py" in result.stdout  # the report follows the run
    assert "torchdoctor: step" not in result.stderr  # no status line outside a terminal


def test_report_is_written_when_the_script_raises(tmp_path) -> None:
    script(tmp_path, end="raise RuntimeError('bad batch')")
    result = torchdoctor("run", "--report", "report.json", "train.py", cwd=tmp_path)
    assert result.returncode == 1
    assert "RuntimeError: bad batch" in result.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["command"] == "run" and report["exit_status"] == 1
    assert report["facts"]["steps"] == 4


def test_ctrl_c_still_writes_the_report(tmp_path) -> None:
    script(tmp_path, end="os.kill(os.getpid(), signal.SIGINT)")
    result = torchdoctor("run", "--report", "report.json", "train.py", cwd=tmp_path)
    assert result.returncode == -2  # ends by SIGINT, as `python train.py` does
    assert json.loads((tmp_path / "report.json").read_text())["facts"]["steps"] == 4


def test_findings_fail_the_run_only_with_fail_on(tmp_path) -> None:
    script(tmp_path, clear=False)
    plain = torchdoctor("run", "train.py", cwd=tmp_path)
    failing = torchdoctor("run", "--fail-on", "error", "--format", "json", "train.py", cwd=tmp_path)
    assert plain.returncode == 0 and "TD201" in plain.stdout
    assert failing.returncode == 1
    findings = json.loads(failing.stdout[failing.stdout.index("{") :])["findings"]
    assert any(f["code"] == "TD201" for f in findings)


def test_max_steps_stops_and_reports(tmp_path) -> None:
    script(tmp_path)
    result = torchdoctor("run", "--max-steps", "2", "--report", "r.json", "train.py", cwd=tmp_path)
    assert result.returncode == 0 and "finished" not in result.stdout
    assert json.loads((tmp_path / "r.json").read_text())["facts"]["steps"] == 2


@pytest.mark.parametrize("context", ["spawn", "fork"])
def test_dataloader_workers_work(tmp_path, context: str) -> None:
    script(tmp_path, workers=2, context=context)
    result = torchdoctor("run", "--report", "r.json", "train.py", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "finished" in result.stdout
    facts = json.loads((tmp_path / "r.json").read_text())["facts"]
    assert facts["steps"] == 8 and facts["batches"] == 8


def test_module_runs_with_dash_m(tmp_path) -> None:
    package = tmp_path / "project"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    script(package)
    result = torchdoctor("run", "-m", "project.train", "--lr", "1", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "argv ['--lr', '1']" in result.stdout and "finished" in result.stdout


def test_missing_script_is_a_usage_error(tmp_path) -> None:
    result = torchdoctor("run", "nope.py", cwd=tmp_path)
    assert result.returncode == 2 and "no such script" in result.stderr


def step_line(path: Path) -> int:
    """The line of the script's `optimizer.step()` call (not its mention in a docstring)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return next(n for n, text in enumerate(lines, 1) if text.strip().startswith("optimizer.step()"))


def test_findings_point_at_the_scripts_line_from_another_folder(tmp_path) -> None:
    # Through the console script when installed: its `sys.exit(main())`, click and runpy
    # sit above the script on the stack and must never be the location.
    lab = Path(__file__).resolve().parents[2] / "examples/lab/TD201-grads-never-cleared"
    target = os.path.relpath(lab / "buggy.py", tmp_path)
    launcher = Path(sys.executable).with_name("torchdoctor")
    command = [str(launcher)] if launcher.exists() else [sys.executable, "-m", "torchdoctor.cli"]
    result = subprocess.run(
        [*command, "run", "--max-steps", "6", "--report", "r.json", target],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert result.returncode == 0, result.stderr
    findings = json.loads((tmp_path / "r.json").read_text())["findings"]
    [grads] = [f for f in findings if f["code"] == "TD201"]
    location = grads["location"]
    script = lab / "buggy.py"
    assert (location["path"], location["line"]) == (str(script), step_line(script))
    assert "optimizer.step()" in location["snippet"]
