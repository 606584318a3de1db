"""`torchdoctor ckpt`: inspection, --model, --write-remapped, --diff, --trust, bad input."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from torchdoctor.cli import main

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.needs_torch

MODELS = textwrap.dedent(
    """
    import torch
    from torch import nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Sequential(nn.Linear(4, 8), nn.ReLU())
            self.head = nn.Linear(8, 2)

    def make():
        return Net()

    def other():
        return nn.Conv2d(3, 16, 5)

    def explodes():
        raise RuntimeError("factory failed")
    """
)


class MakesDirectory:
    def __init__(self, target: str) -> None:
        self.target = target

    def __reduce__(self):
        return (os.mkdir, (self.target,))


@pytest.fixture
def workdir(tmp_path, monkeypatch) -> Path:
    (tmp_path / "models_for_cli.py").write_text(MODELS)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _net_state(prefix: str = "encoder."):
    torch.manual_seed(0)
    state = {
        "encoder.0.weight": torch.randn(8, 4),
        "encoder.0.bias": torch.zeros(8),
        "head.weight": torch.randn(2, 8),
        "head.bias": torch.zeros(2),
    }
    return {k.replace("encoder.", prefix, 1): v for k, v in state.items()}


def _run(*args: str):
    return CliRunner().invoke(main, list(args))


def test_inspecting_a_clean_checkpoint(workdir) -> None:
    torch.save(
        {"model": _net_state(), "epoch": 1, "optimizer": {"state": {}, "param_groups": []}}, "a.pt"
    )
    result = _run("ckpt", "a.pt")
    assert result.exit_code == 0, result.output
    assert "kind: training" in result.output and "memory-mapped" in result.output
    assert "[model] state_dict (4 tensors)" in result.output
    assert "No problems found." in result.output


def test_json_output(workdir) -> None:
    torch.save({"module." + k: v for k, v in _net_state().items()}, "ddp.pt")
    result = _run("ckpt", "ddp.pt", "--format", "json", "--fail-on", "warning")
    assert result.exit_code == 1
    data = json.loads(result.output)
    assert data["facts"]["checkpoint"]["tensor_count"] == 4
    assert [f["code"] for f in data["findings"]] == ["TD805"]


def test_model_remap_writes_a_strictly_loadable_copy(workdir) -> None:
    torch.save(_net_state("backbone."), "old.pt")
    result = _run(
        "ckpt", "old.pt", "--model", "models_for_cli.py:make", "--write-remapped", "new.pt"
    )
    assert result.exit_code == 1, result.output  # TD910 is reported for the source file
    assert "rename 'backbone.' -> 'encoder.': 2 keys" in result.output
    assert "Wrote the remapped checkpoint to new.pt" in result.output
    import models_for_cli

    models_for_cli.Net().load_state_dict(torch.load("new.pt", weights_only=True), strict=True)
    assert _run("ckpt", "new.pt", "--model", "models_for_cli:make").exit_code == 0


def test_unsafe_file_is_refused_without_running_it(workdir) -> None:
    torch.save({"model": _net_state(), "hook": MakesDirectory(str(workdir / "ran"))}, "bad.pt")
    result = _run("ckpt", "bad.pt")
    assert result.exit_code == 1
    assert "TD902" in result.output and ".mkdir" in result.output
    assert not (workdir / "ran").exists()


def test_diff(workdir) -> None:
    torch.save(_net_state(), "a.pt")
    changed = _net_state()
    changed["head.bias"] = torch.tensor([0.0, 0.125])
    torch.save(changed, "b.pt")
    result = _run("ckpt", "a.pt", "--diff", "b.pt")
    assert result.exit_code == 0, result.output
    assert "4 common tensors, 3 identical" in result.output
    assert "head.bias" in result.output and "max |diff| 0.125" in result.output


@pytest.mark.parametrize(
    "case",
    [
        "empty",
        "directory",
        "text",
        "truncated",
        "missing",
        "other model",
        "no model",
        "factory raises",
    ],
)
def test_bad_input_exits_2_with_a_message_and_writes_nothing(workdir, case) -> None:
    torch.save(_net_state(), "good.pt")
    target, extra = "input.pt", ["--model", "models_for_cli:make"]
    if case == "empty":
        Path(target).touch()
    elif case == "directory":
        Path(target).mkdir()
    elif case == "text":
        Path(target).write_text("not a checkpoint\n")
    elif case == "truncated":
        Path(target).write_bytes(Path("good.pt").read_bytes()[:300])
    elif case == "other model":
        torch.save(torch.nn.Conv2d(3, 16, 5).state_dict(), target)
    elif case == "no model":
        target, extra = "good.pt", []
    elif case == "factory raises":
        target, extra = "good.pt", ["--model", "models_for_cli:explodes"]
    before = sorted(p.name for p in workdir.iterdir())
    result = _run("ckpt", target, *extra, "--write-remapped", "out.pt")
    assert result.exit_code == 2, result.output
    assert result.output.startswith("torchdoctor: ") and "Traceback" not in result.output
    assert sorted(p.name for p in workdir.iterdir()) == before
