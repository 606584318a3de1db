"""``torchdoctor summary`` and ``torchdoctor check --forecast``: output, JSON, errors."""

from __future__ import annotations

import json
import textwrap

import pytest

torch = pytest.importorskip("torch")

from click.testing import CliRunner  # noqa: E402

from torchdoctor.cli import main  # noqa: E402

pytestmark = pytest.mark.needs_torch

SETUP = """
import torch
from torch import nn

def make():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Sequential(nn.Linear(16, 3)))
    batch = torch.randn(8, 6), torch.randint(0, 3, (8,))
    return model, batch, nn.CrossEntropyLoss(), torch.optim.Adam(model.parameters())
"""


@pytest.fixture
def target(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(SETUP))
    return f"{path}:make"


def _invoke(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_check_forecast_json_has_a_point_per_batch_size(target) -> None:
    result = _invoke(
        "check",
        target,
        "--select",
        "TD3",
        "--forecast",
        "cuda",
        "--batch-sizes",
        "8,16,32",
        "--device-memory",
        "1GiB",
        "--format",
        "json",
    )
    assert result.exit_code == 0, result.output
    facts = json.loads(result.output)["facts"]
    assert [p["batch_size"] for p in facts["forecast"]] == [8, 16, 32]
    assert all(p["fits"] is True for p in facts["forecast"])
    assert facts["forecast_detail"]["device_memory"] == 2**30
    assert facts["summary"][0]["module"] == "Sequential"


def test_check_forecast_text_shows_the_table_and_the_summary_depth(target) -> None:
    result = _invoke(
        "check",
        target,
        "--select",
        "TD3",
        "--forecast",
        "cpu",
        "--batch-sizes",
        "4",
        "--device-memory",
        "100MiB",
        "--amp",
        "bf16",
        "--summary-depth",
        "1",
    )
    assert result.exit_code == 0, result.output
    assert "Memory forecast of one training step (cpu, 100.0 MiB" in result.output
    assert "autocast bf16" in result.output
    assert "  2.0 " not in result.output  # depth 2 is cut from the table


def test_check_without_forecast_has_the_summary_only(target) -> None:
    result = _invoke("check", target, "--select", "TD3", "--format", "json")
    facts = json.loads(result.output)["facts"]
    assert facts["summary"] and "forecast" not in facts


@pytest.mark.parametrize(
    "args",
    [
        ("--batch-sizes", "8"),
        ("--forecast", "cuda", "--device-memory", "lots"),
        ("--forecast", "cuda", "--batch-sizes", "8,x"),
    ],
)
def test_bad_forecast_options_exit_2_with_a_message(target, args) -> None:
    result = _invoke("check", target, *args)
    assert result.exit_code == 2
    assert "torchdoctor:" in result.output and "Traceback" not in result.output


def test_summary_prints_only_the_table(target) -> None:
    result = _invoke("summary", target, "--depth", "2")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("Model summary") and len(lines) == 2 + 5
    assert lines[2].split()[:3] == ["Sequential", "163", "163"]


def test_summary_json(target) -> None:
    result = _invoke("summary", target, "--format", "json")
    facts = json.loads(result.output)["facts"]
    assert facts["summary"][0]["output_shape"] == [8, 3]
    assert json.loads(result.output)["command"] == "summary"


def test_summary_of_a_missing_factory_is_a_usage_error(tmp_path) -> None:
    result = _invoke("summary", f"{tmp_path / 'nope.py'}:make")
    assert result.exit_code == 2 and "no such file" in result.output
