"""The model summary: counts, shared parameters, output shapes and activation memory."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

import torchdoctor  # noqa: E402
from torchdoctor.preflight.batch import split_batch  # noqa: E402
from torchdoctor.preflight.summary import summarise  # noqa: E402
from torchdoctor.report import RenderOptions, render  # noqa: E402

pytestmark = pytest.mark.needs_torch


class Tied(nn.Module):
    """An embedding whose weight is also the output head's (a language model's tie)."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(50, 16)
        self.body = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 16))
        self.norm = nn.BatchNorm1d(16)
        self.head = nn.Linear(16, 50, bias=False)
        self.head.weight = self.embed.weight
        self.body[0].requires_grad_(False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(self.body(self.embed(ids))))


def _rows(model: nn.Module, batch=None) -> dict[str, dict]:
    summary = summarise(model, split_batch(batch) if batch is not None else None)
    return {row.module: row.to_fact() for row in summary.rows}


def test_counts_per_module_count_a_shared_parameter_once_and_name_it() -> None:
    model = Tied()
    summary = summarise(model)
    rows = {row.module: row for row in summary.rows}
    assert summary.rows[0].module == "Tied" and summary.rows[0].depth == 0
    assert (
        rows["Tied"].parameters
        == sum(p.numel() for p in model.parameters())
        == (50 * 16 + 16 * 32 + 32 + 32 * 16 + 16 + 2 * 16)
    )
    assert rows["Tied"].trainable == rows["Tied"].parameters - (16 * 32 + 32)
    assert rows["head"].parameters == 50 * 16 and rows["body.0"].trainable == 0
    assert rows["norm"].buffers == 16 + 16 + 1
    assert rows["Tied"].dtype == "float32" and rows["Tied"].device == "cpu"
    assert summary.shared == (("embed.weight", "head.weight"),)
    assert rows["Tied"].output_shape is None and rows["Tied"].activation_bytes is None


def test_output_shapes_and_activations_come_from_a_fake_forward() -> None:
    rows = _rows(Tied(), (torch.randint(0, 50, (8,)), torch.randint(0, 50, (8,))))
    assert rows["Tied"]["output_shape"] == [8, 50]
    assert rows["body"]["output_shape"] == [8, 16]
    # body.2 saves its input, the ReLU's output: 8 x 32 floats; the ReLU saves it too
    # (one storage, counted once, for the module that saved it first).
    assert rows["body.1"]["activation_bytes"] == 8 * 32 * 4
    assert rows["body.2"]["activation_bytes"] == 0
    assert rows["body"]["activation_bytes"] == sum(
        rows[f"body.{i}"]["activation_bytes"] for i in range(3)
    )
    assert rows["Tied"]["activation_bytes"] >= rows["body"]["activation_bytes"] > 0


def test_activations_grow_with_the_batch() -> None:
    small = _rows(Tied(), (torch.randint(0, 50, (8,)), torch.randint(0, 50, (8,))))
    large = _rows(Tied(), (torch.randint(0, 50, (32,)), torch.randint(0, 50, (32,))))
    assert large["body"]["activation_bytes"] == 4 * small["body"]["activation_bytes"]


def test_a_model_on_the_meta_device_is_summarised() -> None:
    with torch.device("meta"):
        model = Tied()
    rows = _rows(model, (torch.randint(0, 50, (8,)), torch.randint(0, 50, (8,))))
    assert rows["Tied"]["device"] == "meta" and rows["Tied"]["output_shape"] == [8, 50]
    assert rows["body.1"]["activation_bytes"] == 8 * 32 * 4


class ValueDependent(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        return y[y > 0].sum().expand(len(x))


def test_a_forward_that_reads_values_keeps_the_counts_and_says_why() -> None:
    summary = summarise(ValueDependent(), split_batch((torch.randn(3, 4), torch.randn(3))))
    assert summary.rows[0].parameters == 20
    assert summary.rows[0].output_shape is None
    assert summary.note and "not measured" in summary.note


def test_every_check_report_carries_the_summary_in_json_and_text() -> None:
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    batch = (torch.randn(4, 6), torch.randint(0, 3, (4,)))
    report = torchdoctor.check(model, batch, nn.CrossEntropyLoss(), select=["TD3"])
    first = report.facts["summary"][0]
    assert set(first) >= {
        "module",
        "parameters",
        "trainable",
        "buffers",
        "dtype",
        "output_shape",
        "activation_bytes",
    }
    assert first["parameters"] == 6 * 8 + 8 + 8 * 3 + 3 and first["output_shape"] == [4, 3]
    text = render(report, "text", RenderOptions(width=100))
    assert "Model summary" in text and "Sequential" in text
    assert all(len(line) <= 100 for line in text.splitlines())
    assert '"summary"' in render(report, "json", RenderOptions())


def test_the_text_table_is_cut_at_the_summary_depth() -> None:
    model = nn.Sequential(nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.Linear(2, 2))))
    report = torchdoctor.check(
        model, (torch.randn(4, 2), torch.randn(4, 2)), nn.MSELoss(), select=["TD3"]
    )

    def table(depth: int) -> list[str]:
        text = render(report, "text", RenderOptions(width=100, summary_depth=depth))
        return text.split("Model summary")[1].split("\n\n")[0].splitlines()[2:]

    assert [line.split()[0] for line in table(1)] == ["Sequential", "0"]
    assert [line.split()[0] for line in table(3)] == ["Sequential", "0", "0.0", "0.1", "0.1.0"]
    assert "summary_depth" not in report.facts  # a display choice, not a fact of the model
