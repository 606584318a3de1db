"""Opening checkpoints: formats, memory mapping, refusal of unsafe pickles, bad input."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from tests.unit.ckpt.conftest import digest
from torchdoctor.ckpt.loading import Format, load_checkpoint
from torchdoctor.errors import UsageError

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.needs_torch


class MakesDirectory:
    """Unpickling this creates a directory: proof that the pickle ran."""

    def __init__(self, target: Path) -> None:
        self.target = target

    def __reduce__(self):
        return (os.mkdir, (str(self.target),))


def test_zip_checkpoint_is_memory_mapped_and_records_its_device(save, model) -> None:
    path = save(model.state_dict())
    loaded = load_checkpoint(path)
    assert loaded.format is Format.TORCH_ZIP and loaded.mmap and not loaded.trusted
    assert set(loaded.obj) == set(model.state_dict())
    assert set(loaded.locations.values()) == {"cpu"}


def test_legacy_checkpoint_loads_without_mmap(save, model) -> None:
    path = save(model.state_dict(), _use_new_zipfile_serialization=False)
    loaded = load_checkpoint(path)
    assert loaded.format is Format.TORCH_LEGACY and not loaded.mmap
    assert torch.equal(loaded.obj["head.weight"], model.state_dict()["head.weight"])


def test_safetensors_file_is_read_lazily(tmp_path, model) -> None:
    pytest.importorskip("safetensors")
    from safetensors.torch import save_file

    path = tmp_path / "model.safetensors"
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(path))
    loaded = load_checkpoint(path)
    assert loaded.format is Format.SAFETENSORS
    assert loaded.obj.describe("head.weight") == ((3, 8), "float32")
    assert torch.equal(loaded.obj["head.bias"], model.head.bias.detach())


@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
def test_malicious_pickle_runs_no_code_without_trust(save, tmp_path, legacy) -> None:
    marker = tmp_path / "pwned"
    path = save(
        {"weights": torch.ones(2), "payload": MakesDirectory(marker)},
        _use_new_zipfile_serialization=not legacy,
    )
    before = digest(path)
    loaded = load_checkpoint(path)
    assert loaded.refused and loaded.obj is None
    assert any(name.endswith(".mkdir") for name in loaded.unsafe_globals)
    assert not marker.exists(), "the pickle ran without --trust"
    assert digest(path) == before
    load_checkpoint(path, trust=True)  # the same file does run code once trusted
    assert marker.is_dir()


def test_unsafe_classes_are_named_and_a_plain_checkpoint_has_none(save, model) -> None:
    unsafe = load_checkpoint(
        save({"model": model.state_dict(), "args": argparse.Namespace()}, "args.pt")
    )
    assert unsafe.unsafe_globals == ("argparse.Namespace",)
    safe = load_checkpoint(save({"model": model.state_dict(), "args": {"lr": 0.1}}))
    assert safe.unsafe_globals == () and safe.obj is not None


def test_whole_module_pickle_is_refused_and_recognised(save, model) -> None:
    loaded = load_checkpoint(save(model))
    assert loaded.refused and loaded.holds_module
    assert "torch.nn.modules.linear.Linear" in loaded.unsafe_globals
    trusted = load_checkpoint(loaded.path, trust=True)
    assert isinstance(trusted.obj, torch.nn.Module) and trusted.trusted


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.jit is deprecated
def test_torchscript_archive_gets_a_clear_error(tmp_path) -> None:
    path = tmp_path / "scripted.pt"
    torch.jit.trace(torch.nn.Linear(2, 2), torch.ones(1, 2)).save(str(path))
    with pytest.raises(UsageError, match="TorchScript"):
        load_checkpoint(path)


def _truncate(path: Path) -> Path:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    return path


@pytest.mark.parametrize(
    "case, message",
    [
        ("missing", "no such file"),
        ("directory", "is a directory"),
        ("empty", "is empty"),
        ("text", "not a PyTorch checkpoint"),
        ("truncated zip", "truncated or corrupt"),
        ("truncated legacy", "truncated or corrupt"),
    ],
)
def test_bad_input_is_a_clear_usage_error(tmp_path, save, model, case, message) -> None:
    path = tmp_path / "input.pt"
    if case == "directory":
        path.mkdir()
    elif case == "empty":
        path.touch()
    elif case == "text":
        path.write_text("epoch,loss\n1,0.5\n")
    elif case == "truncated zip":
        path = _truncate(save(model.state_dict(), "zip.pt"))
    elif case == "truncated legacy":
        path = _truncate(save(model.state_dict(), "old.pt", _use_new_zipfile_serialization=False))
    with pytest.raises(UsageError, match=message):
        load_checkpoint(path)
