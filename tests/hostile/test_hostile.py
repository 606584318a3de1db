"""Hostile and odd input: every case ends within its time budget, under a memory cap, with
exit 2 (a clear usage error) or findings; never a traceback, never "a bug in torchdoctor".

Each case runs ``torchdoctor ...`` in a subprocess limited by ``resource.setrlimit``
(address space) and a wall-clock timeout; the inputs are built in ``tmp_path``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

resource = pytest.importorskip("resource")
pytestmark = [pytest.mark.slow]

MEMORY_CAP = 6 << 30  # address space: torch maps about 2 GiB of libraries by itself
TIME_BUDGET = 180  # seconds, generous for a loaded CI machine; the cases take a few
ROOT = Path(__file__).resolve().parents[2]


def torchdoctor(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    def limits() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))

    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run(
        [sys.executable, "-m", "torchdoctor.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        timeout=TIME_BUDGET,
        preexec_fn=limits,
        check=False,
    )


def assert_clean(result: subprocess.CompletedProcess[str], *, codes: tuple[int, ...]) -> None:
    output = result.stdout + result.stderr
    assert result.returncode in codes, output[-2000:]
    assert "Traceback" not in output, output[-2000:]
    assert "bug in torchdoctor" not in output and "internal-error" not in output, output[-2000:]


# --- lint ---------------------------------------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs")
def test_lint_a_tree_with_a_fifo(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.py")
    (tmp_path / "ok.py").write_text("x = 1\n", encoding="utf-8")
    result = torchdoctor("lint", "--format", "concise", ".", cwd=tmp_path)
    assert_clean(result, codes=(0, 1))
    assert "TD002" in result.stdout and "FIFO" in result.stdout


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_lint_a_link_to_a_device(tmp_path: Path, device: str) -> None:
    if not os.path.exists(device):
        pytest.skip(f"no {device}")
    (tmp_path / "endless.py").symlink_to(device)
    result = torchdoctor("lint", ".", cwd=tmp_path)
    assert_clean(result, codes=(0, 1))
    assert "TD002" in result.stdout


def test_lint_a_huge_file_is_skipped_by_the_size_cap(tmp_path: Path) -> None:
    (tmp_path / "generated.py").write_text("value = 1\n" * 1_200_000, encoding="utf-8")
    result = torchdoctor("lint", ".", cwd=tmp_path)
    assert_clean(result, codes=(0, 1))
    assert "max-file-size" in result.stdout


@pytest.mark.parametrize(
    "source",
    [
        "x = " + "(" * 100_000 + "1" + ")" * 100_000 + "\n",
        "x = " + "[" * 5_000 + "]" * 5_000 + "\n",
        "if x:\n" + "".join(" " * i + "if x:\n" for i in range(1, 200)) + " " * 200 + "pass\n",
        "\0\xff garbage",
    ],
    # Short ids: pytest puts the id in PYTEST_CURRENT_TEST, which the subprocess inherits,
    # and one environment string over 128 KiB makes exec fail with E2BIG.
    ids=["deep-parentheses", "deep-brackets", "deep-blocks", "binary"],
)
def test_lint_deep_or_binary_sources(tmp_path: Path, source: str) -> None:
    (tmp_path / "odd.py").write_text(source, encoding="utf-8", errors="surrogateescape")
    assert_clean(torchdoctor("lint", "odd.py", cwd=tmp_path), codes=(0, 1))


# --- configuration ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "config",
    [
        b'[tool.torchdoctor]\nselcet = ["TD2"]\n',
        b'[tool.torchdoctor]\nrespect-gitignore = "no"\n',
        b'[tool.torchdoctor]\nselect = ["XYZ"]\n',
        b'[tool.torchdoctor]\nselect = ["TD2"] # \xff\xfe not UTF-8\n',
        b"[tool.torchdoctor\nselect = \n",
    ],
)
def test_bad_configs_are_usage_errors(tmp_path: Path, config: bytes) -> None:
    (tmp_path / "pyproject.toml").write_bytes(config)
    (tmp_path / "t.py").write_text("x = 1\n", encoding="utf-8")
    result = torchdoctor("lint", "t.py", cwd=tmp_path)
    assert_clean(result, codes=(2,))
    assert "pyproject.toml" in result.stderr


def test_an_unknown_selector_on_the_command_line(tmp_path: Path) -> None:
    (tmp_path / "t.py").write_text("x = 1\n", encoding="utf-8")
    result = torchdoctor("lint", "--select", "TD2O1", "t.py", cwd=tmp_path)
    assert_clean(result, codes=(2,))
    assert "TD201" in result.stderr


def test_a_deep_baseline(tmp_path: Path) -> None:
    (tmp_path / "t.py").write_text("x = 1\n", encoding="utf-8")
    (tmp_path / "base.json").write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    assert_clean(torchdoctor("lint", "--baseline", "base.json", "t.py", cwd=tmp_path), codes=(2,))


# --- outputs that name inputs -------------------------------------------------------------

SCRIPT = "import torch\nprint('ran')\n"


@pytest.mark.parametrize(
    "command",
    [
        ("lint", "t.py", "-o", "t.py"),
        ("lint", ".", "-o", "t.py"),
        ("run", "--report", "t.py", "t.py"),
        ("run", "--report", "missing/r.json", "t.py"),
        ("check", "t.py:make", "-o", "t.py"),
        ("ckpt", "c.pt", "--write-remapped", "c.pt"),
        ("ckpt", "c.pt", "--write-remapped", "d.pt"),
    ],
)
def test_outputs_that_would_overwrite_inputs_are_refused(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    (tmp_path / "t.py").write_text(SCRIPT, encoding="utf-8")
    (tmp_path / "c.pt").write_bytes(b"PK\x03\x04 not really")
    (tmp_path / "d.pt").write_bytes(b"existing")
    result = torchdoctor(*command, cwd=tmp_path)
    assert_clean(result, codes=(2,))
    assert "ran" not in result.stdout
    assert (tmp_path / "t.py").read_text(encoding="utf-8") == SCRIPT
    assert (tmp_path / "d.pt").read_bytes() == b"existing"


# --- checkpoints --------------------------------------------------------------------------


def _base(tmp_path: Path) -> Path:
    torch = pytest.importorskip("torch")
    path = tmp_path / "base.pt"
    torch.save({"w": torch.zeros(4)}, path)
    return path


def _rewrite(
    source: Path,
    target: Path,
    change: Callable[[str, bytes], bytes],
    extra: dict[str, bytes] | None = None,
    compression: int = zipfile.ZIP_STORED,
) -> None:
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(target, "w", compression) as new:
        for info in old.infolist():
            new.writestr(info.filename, change(info.filename, old.read(info.filename)))
        for name, data in (extra or {}).items():
            new.writestr(name, data)


def _stride_zero(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    torch.save({"w": torch.zeros(1, 1).expand(2**20, 2**20)}, tmp_path / "x.pt")


def _zip_bomb(tmp_path: Path) -> None:
    _rewrite(
        _base(tmp_path),
        tmp_path / "x.pt",
        lambda name, data: b"\0" * (1 << 30) if name.endswith("data/0") else data,
        compression=zipfile.ZIP_DEFLATED,
    )


def _traversal(tmp_path: Path) -> None:
    _rewrite(_base(tmp_path), tmp_path / "x.pt", lambda name, data: data, {"../../evil.txt": b"x"})


def _lying_header(tmp_path: Path) -> None:
    _rewrite(_base(tmp_path), tmp_path / "x.pt", lambda name, data: data)
    data = bytearray((tmp_path / "x.pt").read_bytes())
    # Grow the declared sizes of the first member's central-directory entry.
    central = data.rfind(b"PK\x01\x02", 0, data.rfind(b"PK\x05\x06"))
    first = data.find(b"PK\x01\x02")
    for at in {central, first}:
        data[at + 20 : at + 28] = (1 << 31).to_bytes(4, "little") * 2
    (tmp_path / "x.pt").write_bytes(bytes(data))


_PICKLES = {
    "stack_global": b"\x80\x04\x95\x1b\x00\x00\x00\x00\x00\x00\x00\x8c\x02os\x94\x8c\x06"
    b"system\x94\x93\x94\x8c\x02id\x94\x85\x94R\x94.",
    "global_reduce": b"\x80\x02cos\nsystem\nq\x00X\x02\x00\x00\x00idq\x01\x85q\x02Rq\x03.",
    "inst": b"(S'id'\nios\nsystem\n.",
    "obj": b"\x80\x02(cos\nsystem\nS'id'\no.",
    "build": b"\x80\x02cbuiltins\nobject\n)\x81}S'x'\nK\x01sb.",
    "lying_frame": b"\x80\x04\x95\xff\xff\xff\xff\x00\x00\x00\x00.",
}


def _pickle_in_zip(kind: str) -> Callable[[Path], None]:
    def build(tmp_path: Path) -> None:
        payload = _PICKLES[kind]
        _rewrite(
            _base(tmp_path),
            tmp_path / "x.pt",
            lambda name, data: payload if name.endswith("data.pkl") else data,
        )

    return build


def _legacy_pickle(kind: str) -> Callable[[Path], None]:
    def build(tmp_path: Path) -> None:
        (tmp_path / "x.pt").write_bytes(_PICKLES[kind])

    return build


CHECKPOINTS: dict[str, Callable[[Path], None]] = {
    "stride-zero-view": _stride_zero,
    "zip-bomb": _zip_bomb,
    "path-traversal": _traversal,
    "lying-header": _lying_header,
    **{f"zip-{kind}": _pickle_in_zip(kind) for kind in _PICKLES},
    **{f"legacy-{kind}": _legacy_pickle(kind) for kind in _PICKLES},
}


@pytest.mark.needs_torch
@pytest.mark.parametrize("name", sorted(CHECKPOINTS))
def test_hostile_checkpoints(tmp_path: Path, name: str) -> None:
    CHECKPOINTS[name](tmp_path)
    marker = tmp_path / "ran"
    result = torchdoctor("ckpt", "x.pt", cwd=tmp_path)
    assert_clean(result, codes=(0, 1, 2))
    assert not marker.exists()
