"""Zero change: every case script behaves the same run plainly and under `torchdoctor run`.

Each case runs twice in a fresh copy of ``cases/``: ``python case.py ARGS`` and
``python -m torchdoctor.cli run --format json case.py ARGS``. Standard output must be the
plain output followed by exactly one JSON report; standard error, the exit status and every
file the script wrote must be identical (checkpoints compared tensor by tensor, bitwise).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.needs_torch, pytest.mark.slow]
torch = pytest.importorskip("torch")

CASES = Path(__file__).parent / "cases"
ROOT = Path(__file__).resolve().parents[2]

RUNS = [
    ("save_model.py",),
    ("deepcopy_model.py",),
    ("pickle_optimizer.py",),
    ("compile_model.py",),
    ("jit_model.py",),
    ("data_parallel.py",),
    ("user_hooks.py",),
    ("dtypes.py",),
    ("sparse_gradients.py",),
    ("lbfgs_closure.py",),
    ("warning_filters.py",),
    ("change_directory.py",),
    ("path_edits.py", "--flag", "x"),
    ("fork_children.py",),
    ("exits.py", "sys_exit_3"),
    ("exits.py", "sys_exit_message"),
    ("exits.py", "raise"),
    ("exits.py", "os_exit"),
    ("exits.py", "sigterm"),
    ("exits.py", "sigint"),
    ("exits.py", "own_handler"),
]


def run(command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PYTHONHASHSEED": "0",
        "PYTHONPATH": str(ROOT / "src"),
    }
    env.pop("PYTHONWARNINGS", None)
    return subprocess.run(
        command, cwd=cwd, capture_output=True, text=True, env=env, timeout=280, check=False
    )


def written(folder: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(folder)): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts
    }


def same_checkpoint(a: bytes, b: bytes) -> bool:
    if a == b:
        return True
    try:
        left = torch.load(io.BytesIO(a), weights_only=False)
        right = torch.load(io.BytesIO(b), weights_only=False)
    except Exception:  # noqa: BLE001 - not a torch.save file: bytes decide
        return False
    return same_value(left, right)


def same_value(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return (
            a.dtype == b.dtype
            and a.shape == b.shape
            and a.layout == b.layout
            and (a.to_dense() if a.is_sparse else a)
            .contiguous()
            .view(torch.uint8)
            .equal((b.to_dense() if b.is_sparse else b).contiguous().view(torch.uint8))
        )
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(same_value(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, torch.nn.Module) and isinstance(b, torch.nn.Module):
        return (
            type(a) is type(b)
            and same_value(a.state_dict(), b.state_dict())
            and len(a._forward_pre_hooks) == len(b._forward_pre_hooks)
        )
    return bool(a == b)


@pytest.mark.parametrize("case", RUNS, ids=lambda case: "-".join(case).replace(".py", ""))
def test_the_script_behaves_the_same_under_run(case: tuple[str, ...], tmp_path: Path) -> None:
    plain_dir, watched_dir = tmp_path / "plain", tmp_path / "watched"
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(CASES, plain_dir, ignore=ignore)
    shutil.copytree(CASES, watched_dir, ignore=ignore)
    plain = run([sys.executable, *case], plain_dir)
    report_file = tmp_path / "report.json"
    watched = run(
        [
            sys.executable,
            "-m",
            "torchdoctor.cli",
            "run",
            "--format",
            "json",
            "--report",
            str(report_file),
            *case,
        ],
        watched_dir,
    )

    plain_out, plain_err = (
        text.replace(str(plain_dir), "<dir>") for text in (plain.stdout, plain.stderr)
    )
    out, err = (
        text.replace(str(watched_dir), "<dir>") for text in (watched.stdout, watched.stderr)
    )
    assert watched.returncode == plain.returncode, watched.stderr
    assert err == plain_err
    assert out.startswith(plain_out), (plain_out, out)
    printed = out[len(plain_out) :]
    if case[1:] != ("os_exit",):  # os._exit skips the printed report, not the file
        assert json.loads(printed)["command"] == "run"
    report = json.loads(report_file.read_text(encoding="utf-8"))
    assert report["command"] == "run"
    assert not [f for f in report["findings"] if f["code"] == "TD001"], report["findings"]

    plain_files, watched_files = written(plain_dir), written(watched_dir)
    assert sorted(plain_files) == sorted(watched_files)
    for name, content in plain_files.items():
        if name.endswith(".pt"):
            assert same_checkpoint(content, watched_files[name]), name
        else:
            assert content == watched_files[name], name
