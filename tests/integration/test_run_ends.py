"""`torchdoctor run` leaves its report however the script ends, and checks its output
path before the script starts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.integration.terminal import as_from_a_terminal

pytestmark = [pytest.mark.needs_torch, pytest.mark.slow]

SCRIPT = textwrap.dedent("""
    import os, signal, sys
    import torch

    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(6):
        model(torch.randn(8, 4)).pow(2).mean().backward()   # grads never cleared: TD201
        optimizer.step()
    print("trained", flush=True)
    END
    print("end")
""")


def python(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        as_from_a_terminal([sys.executable, *args]),
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
        check=False,
    )


def write(tmp_path: Path, end: str) -> None:
    (tmp_path / "s.py").write_text(SCRIPT.replace("END", end), encoding="utf-8")


@pytest.mark.parametrize(
    ("end", "status"),
    [
        ("os.kill(os.getpid(), signal.SIGTERM)", -signal.SIGTERM),
        ("os.kill(os.getpid(), signal.SIGHUP)", -signal.SIGHUP),
        ("os._exit(3)", 3),
    ],
)
def test_the_report_file_survives_ends_without_unwinding(
    tmp_path: Path, end: str, status: int
) -> None:
    write(tmp_path, end)
    plain = python("s.py", cwd=tmp_path)
    watched = python("-m", "torchdoctor.cli", "run", "--report", "r.json", "s.py", cwd=tmp_path)
    assert plain.returncode == watched.returncode == status
    assert "end" not in watched.stdout
    report = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert "TD201" in {f["code"] for f in report["findings"]}
    if status < 0:
        assert report["exit_status"] == 128 - status
        assert "TD201" in watched.stdout  # the report is printed too


def test_a_script_that_changes_directory_does_not_move_the_report(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    write(tmp_path, "os.chdir('elsewhere')")
    result = python("-m", "torchdoctor.cli", "run", "--report", "r.json", "s.py", cwd=tmp_path)
    assert result.returncode == 0
    assert (tmp_path / "r.json").is_file() and not (tmp_path / "elsewhere" / "r.json").exists()


@pytest.mark.parametrize("report", ["missing/r.json", "s.py"])
def test_a_bad_report_path_stops_the_run_before_the_script(tmp_path: Path, report: str) -> None:
    write(tmp_path, "open('ran', 'w').close()")
    result = python("-m", "torchdoctor.cli", "run", "--report", report, "s.py", cwd=tmp_path)
    assert result.returncode == 2 and "--report" in result.stderr
    assert not (tmp_path / "ran").exists() and "trained" not in result.stdout
    assert (tmp_path / "s.py").read_text(encoding="utf-8").startswith("\nimport os")
