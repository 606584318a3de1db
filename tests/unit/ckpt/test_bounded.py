"""ckpt reads stored bytes only, refuses forged archives, and names every cause clearly."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.needs_torch
torch = pytest.importorskip("torch")

from torchdoctor.ckpt.loading import load_checkpoint  # noqa: E402
from torchdoctor.ckpt.structure import counters  # noqa: E402
from torchdoctor.ckpt.values import count_non_finite, max_abs_difference  # noqa: E402
from torchdoctor.errors import UsageError  # noqa: E402


def rewritten(
    source: Path,
    target: Path,
    change: dict[str, bytes | None],
    extra: dict[str, bytes] | None = None,
    compression: int = zipfile.ZIP_STORED,
) -> Path:
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(target, "w", compression) as new:
        for info in old.infolist():
            data = old.read(info.filename)
            for suffix, replacement in change.items():
                if info.filename.endswith(suffix) and replacement is not None:
                    data = replacement
            new.writestr(info.filename, data)
        for name, data in (extra or {}).items():
            new.writestr(name, data)
    return target


@pytest.fixture
def small(tmp_path: Path) -> Path:
    path = tmp_path / "small.pt"
    torch.save({"w": torch.zeros(4)}, path)
    return path


def test_a_stride_zero_view_is_scanned_through_its_storage() -> None:
    view = torch.tensor([float("nan")]).expand(2**20, 2**20)
    assert count_non_finite(view) == (1, 0)  # one stored value, not 2**40
    assert max_abs_difference(view, torch.zeros(1).expand(2**20, 2**20)) != 0.0


def test_a_permuted_view_still_counts_every_value() -> None:
    values = torch.tensor([[1.0, float("inf")], [float("nan"), 2.0]]).t()
    assert count_non_finite(values) == (1, 1)
    assert max_abs_difference(values, values.clone()) == 0.0


def test_a_stride_zero_checkpoint_loads_in_bounded_time(tmp_path: Path) -> None:
    from torchdoctor.ckpt import diagnose

    path = tmp_path / "view.pt"
    torch.save({"w": torch.zeros(1, 1).expand(2**20, 2**20)}, path)
    assert path.stat().st_size < 4096
    report = diagnose(path)
    assert "TD911" not in report.codes()


def test_a_zip_bomb_is_refused_before_inflating(small: Path, tmp_path: Path) -> None:
    bomb = rewritten(
        small,
        tmp_path / "bomb.pt",
        {"data/0": b"\0" * (64 << 20)},
        compression=zipfile.ZIP_DEFLATED,
    )
    with pytest.raises(UsageError, match="zip bomb"):
        load_checkpoint(bomb)


def test_a_member_outside_the_archive_folder_is_refused(small: Path, tmp_path: Path) -> None:
    evil = rewritten(small, tmp_path / "evil.pt", {}, {"../../evil.txt": b"x"})
    with pytest.raises(UsageError, match="outside its archive folder"):
        load_checkpoint(evil)


def test_members_in_two_top_folders_are_refused(small: Path, tmp_path: Path) -> None:
    odd = rewritten(small, tmp_path / "odd.pt", {}, {"other/data.bin": b"x"})
    with pytest.raises(UsageError, match="several top folders"):
        load_checkpoint(odd)


def test_a_header_declaring_bytes_beyond_the_file_is_refused(small: Path, tmp_path: Path) -> None:
    data = bytearray(small.read_bytes())
    truncated = tmp_path / "cut.pt"
    truncated.write_bytes(bytes(data[: len(data) // 2]) + bytes(data[-200:]))
    with pytest.raises(UsageError):
        load_checkpoint(truncated)


@pytest.mark.parametrize(
    "pickle_bytes",
    [
        b"\x80\x04\x95\x1b\x00\x00\x00\x00\x00\x00\x00\x8c\x02os\x94\x8c\x06system\x94\x93\x94"
        b"\x8c\x02id\x94\x85\x94R\x94.",  # STACK_GLOBAL + REDUCE
        b"(S'id'\nios\nsystem\n.",  # INST
        b"\x80\x02(cos\nsystem\nS'id'\no.",  # OBJ
        b"\x80\x02cos\nsystem\nq\x00X\x02\x00\x00\x00idq\x01\x85q\x02Rq\x03.",  # GLOBAL + REDUCE
        b"\x80\x04\x95\x00\x00\x00\x00\x00\x00\x00\x00.",  # a lying FRAME
    ],
)
def test_hostile_pickles_in_a_zip_are_refused_or_named(
    small: Path, tmp_path: Path, pickle_bytes: bytes
) -> None:
    hostile = rewritten(small, tmp_path / "hostile.pt", {"data.pkl": pickle_bytes})
    try:
        loaded = load_checkpoint(hostile)
    except UsageError as error:
        assert str(hostile) in str(error)
    else:
        assert loaded.refused and loaded.obj is None


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads anything")
def test_an_unreadable_file_is_a_usage_error(small: Path) -> None:
    small.chmod(0)
    try:
        with pytest.raises(UsageError, match="cannot be read"):
            load_checkpoint(small)
    finally:
        small.chmod(0o644)


@pytest.mark.parametrize(
    "key",
    [
        "iter_num",
        "global_step",
        "step",
        "iteration",
        "epoch",
        "num_updates",
        "tokens_seen",
        "epoch_idx",
    ],
)
def test_step_counters_of_common_training_loops_are_recognised(key: str) -> None:
    assert counters({"model": {"w": torch.zeros(1)}, key: 5}) == ((key, "5"),)


@pytest.mark.parametrize("key", ["best_val_loss", "config", "lr", "model_args"])
def test_other_numbers_are_not_counters(key: str) -> None:
    assert counters({"model": {"w": torch.zeros(1)}, key: 5}) == ()


def test_trust_imports_a_class_defined_in_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "netdef_here.py").write_text(
        "import torch\nclass Net(torch.nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.fc = torch.nn.Linear(2, 2)\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import netdef_here  # type: ignore[import-not-found]

    torch.save({"model": netdef_here.Net()}, tmp_path / "m.pt")
    monkeypatch.undo()  # the class is no longer importable from sys.path...
    import sys

    sys.modules.pop("netdef_here", None)
    monkeypatch.chdir(tmp_path)  # ...only from the current directory, as `python` has it
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    loaded = load_checkpoint(tmp_path / "m.pt", trust=True)
    assert type(loaded.obj["model"]).__name__ == "Net"
    assert str(tmp_path) not in sys.path
    sys.modules.pop("netdef_here", None)
