"""``torchdoctor check TARGET``: exit codes, formats, options and clear failures."""

from __future__ import annotations

import json
import textwrap

import pytest

torch = pytest.importorskip("torch")

from click.testing import CliRunner  # noqa: E402

from torchdoctor.cli import main  # noqa: E402

pytestmark = pytest.mark.needs_torch

SETUPS = """
import torch
from torch import nn

class Net(nn.Module):
    def __init__(self, final=None, fail=None):
        super().__init__()
        torch.manual_seed(0)
        self.body = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
        self.final = final
        self.fail = fail

    def forward(self, x):
        if self.fail is not None:
            raise self.fail
        out = self.body(x)
        return self.final(out) if self.final is not None else out

def batch():
    generator = torch.Generator().manual_seed(1)
    return torch.randn(32, 6, generator=generator), torch.randint(0, 3, (32,), generator=generator)

def make():
    return Net(), batch(), nn.CrossEntropyLoss()

def softmaxed():
    model = Net(final=lambda z: torch.softmax(z, dim=1))
    return model, batch(), nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), lr=0.1)

def nan_everywhere():
    inputs, targets = batch()
    return Net(), (torch.full_like(inputs, float("nan")), targets), nn.CrossEntropyLoss()

def shape_bug():
    error = RuntimeError("mat1 and mat2 shapes cannot be multiplied (32x6 and 7x16)")
    return Net(fail=error), batch(), nn.CrossEntropyLoss()

def out_of_memory():
    return Net(fail=MemoryError()), batch(), nn.CrossEntropyLoss()

def interrupted():
    return Net(fail=KeyboardInterrupt()), batch(), nn.CrossEntropyLoss()

def factory_raises():
    raise FileNotFoundError("data/train.csv")


def stepped():
    # a dict batch the model cannot take whole, trained by the user's own step
    model = Net(final=nn.Softmax(dim=1))
    x, y = batch()

    def train_step(model, batch):
        return nn.functional.cross_entropy(model(batch["pixels"]), batch["digit"])

    return {"model": model, "data": {"pixels": x, "digit": y}, "step": train_step}


def unsplittable():
    x, y = batch()
    return Net(), {"pixels": x, "digit": y}, nn.CrossEntropyLoss()
"""


@pytest.fixture(scope="module")
def setups(tmp_path_factory):
    path = tmp_path_factory.mktemp("cli") / "setups.py"
    path.write_text(textwrap.dedent(SETUPS))
    return path


def _invoke(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_clean_setup_exits_0(setups) -> None:
    result = _invoke("check", str(setups), "--select", "TD1,TD2,TD3,TD4")
    assert result.exit_code == 0, result.output
    assert "No problems found." in result.output


def test_a_factory_returns_its_step_and_the_step_is_checked(setups) -> None:
    result = _invoke("check", f"{setups}:stepped", "--format", "json", "--select", "TD3")
    assert result.exit_code == 1, result.output
    assert [f["code"] for f in json.loads(result.stdout)["findings"]] == ["TD301"]


def test_a_batch_that_fits_nothing_exits_2_naming_it_and_the_step_to_add(setups) -> None:
    result = CliRunner().invoke(main, ["check", f"{setups}:unsplittable"])
    assert result.exit_code == 2
    assert "'pixels' (float32 [" in result.output and "step=train_step" in result.output


def test_error_finding_exits_1_and_json_is_parseable(setups) -> None:
    result = _invoke("check", f"{setups}:softmaxed", "--format", "json", "--select", "TD3")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    [found] = report["findings"]
    assert found["code"] == "TD301" and found["location"]["line"]


def test_fail_on_never_and_ignore(setups) -> None:
    assert (
        _invoke("check", f"{setups}:softmaxed", "--select", "TD3", "--fail-on", "never").exit_code
        == 0
    )
    assert (
        _invoke("check", f"{setups}:softmaxed", "--select", "TD3", "--ignore", "TD301").exit_code
        == 0
    )


def test_output_file_and_device_option(setups, tmp_path) -> None:
    out = tmp_path / "report.json"
    result = _invoke(
        "check",
        f"{setups}:softmaxed",
        "--select",
        "TD101,TD301",
        "--device",
        "cpu",
        "--format",
        "json",
        "--output",
        str(out),
    )
    assert result.exit_code == 1 and result.stdout == ""
    assert json.loads(out.read_text())["facts"]["device"] == "cpu"


def test_nan_everywhere_is_a_finding_not_a_crash(setups) -> None:
    result = _invoke("check", f"{setups}:nan_everywhere", "--select", "TD1,TD2,TD3,TD4")
    assert result.exit_code == 1
    assert "TD401" in result.output and "Traceback" not in result.output


@pytest.mark.parametrize(
    "factory, expected",
    [
        ("shape_bug", "the model's forward raised RuntimeError: mat1 and mat2 shapes"),
        ("out_of_memory", "the model's forward ran out of memory"),
        ("factory_raises", "FileNotFoundError: data/train.csv"),
        ("interrupted", "torchdoctor: interrupted"),
        ("no_such_factory", "has no attribute 'no_such_factory'"),
    ],
)
def test_failures_exit_2_with_a_clear_message_and_no_traceback(setups, factory, expected) -> None:
    result = _invoke("check", f"{setups}:{factory}", "--select", "TD1,TD2,TD3,TD4")
    assert result.exit_code == 2
    assert expected in result.stderr
    assert "Traceback" not in result.output


def test_user_code_failure_names_the_users_line(setups) -> None:
    result = _invoke("check", f"{setups}:shape_bug", "--select", "TD2")
    assert f"{setups}:" in result.stderr and "(in module `Net`)" in result.stderr


def test_debug_shows_the_traceback(setups) -> None:
    result = _invoke("--debug", "check", f"{setups}:shape_bug", "--select", "TD2")
    assert result.exit_code == 2 and "Traceback" in result.stderr


def test_missing_file_is_a_usage_error(tmp_path) -> None:
    result = _invoke("check", str(tmp_path / "absent.py"))
    assert result.exit_code == 2 and "no such file" in result.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_unavailable_device_is_a_usage_error(setups) -> None:
    result = _invoke("check", str(setups), "--device", "cuda")
    assert result.exit_code == 2 and "cannot move the batch to cuda" in result.stderr
