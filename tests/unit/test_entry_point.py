"""`python -m torchdoctor` runs the same command line as the `torchdoctor` script."""

from __future__ import annotations

import subprocess
import sys


def test_python_dash_m_torchdoctor_is_the_command_line() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "torchdoctor", "explain", "TD201"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "zero_grad" in result.stdout
    usage = subprocess.run(
        [sys.executable, "-m", "torchdoctor", "--help"], capture_output=True, text=True, timeout=120
    )
    assert usage.stdout.startswith("Usage: torchdoctor ")
