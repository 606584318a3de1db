"""The summary and forecast sections of the text report, from facts alone (no torch)."""

from __future__ import annotations

from torchdoctor.findings import Report
from torchdoctor.report import RenderOptions, render
from torchdoctor.report.memory_text import forecast_lines, format_bytes, summary_lines

ROW = {
    "module": "Net",
    "type": "Net",
    "depth": 0,
    "parameters": 1_234_567,
    "trainable": 1_000_000,
    "buffers": 0,
    "dtype": "float32",
    "device": "cpu",
    "output_shape": [8, 10],
    "activation_bytes": 3 * 2**20,
}
POINT = {
    "batch_size": 64,
    "peak_bytes": 90 * 2**30,
    "fits": False,
    "breakdown": {
        "parameters": 2**30,
        "gradients": 2**30,
        "optimizer_state": 2**31,
        "activations": 80 * 2**30,
        "temporaries": 6 * 2**30,
        "batch": 2**20,
    },
}
DETAIL = {
    "device": "cuda",
    "amp": None,
    "device_memory": 80 * 2**30,
    "usable_bytes": 75 * 2**30,
    "largest_batch_size": 52,
    "per_sample_bytes": 2**30,
    "top_modules": [{"module": "blocks.0", "activation_bytes": 2**30}],
    "remedies": [
        {
            "name": "autocast bf16",
            "peak_bytes": 50 * 2**30,
            "saving_bytes": 40 * 2**30,
            "fits": True,
        }
    ],
    "method": "fake tensors",
}


def _text(facts: dict) -> str:
    report = Report(tool_version="0", command="check", created="2026-01-01T00:00:00+00:00")
    report.facts.update(facts)
    return render(report, "text", RenderOptions(width=100))


def test_bytes_are_written_in_binary_units() -> None:
    assert [format_bytes(n) for n in (0, 1536, 3 * 2**20, 80 * 2**30, None)] == [
        "0 B",
        "1.5 KiB",
        "3.0 MiB",
        "80.0 GiB",
        "-",
    ]


def test_the_summary_table_shows_counts_shape_and_activations() -> None:
    text = _text({"summary": [ROW], "shared_parameters": [["a.weight", "b.weight"]]})
    line = next(line for line in text.splitlines() if line.strip().startswith("Net"))
    assert line.split() == ["Net", "1.2M", "1.0M", "0", "float32", "8x10", "3.0", "MiB"]
    assert "shared (counted once): a.weight, b.weight" in text


def test_the_forecast_table_marks_what_does_not_fit() -> None:
    text = _text({"forecast": [POINT], "forecast_detail": DETAIL})
    assert "Memory forecast of one training step (cuda, 80.0 GiB (usable 75.0 GiB))" in text
    assert "       64    90.0 GiB    NO     1.0 GiB" in text
    assert "largest batch size that fits: 52" in text
    assert "autocast bf16: 50.0 GiB (saves 40.0 GiB)" in text
    assert all(len(line) <= 100 for line in text.splitlines())


def test_a_forecast_that_could_not_run_says_why() -> None:
    lines = forecast_lines(
        {
            "forecast": [],
            "forecast_detail": {
                "device": "cuda",
                "error": "the training step cannot be measured on fake tensors: x",
            },
        }
    )
    assert [line.plain for line in lines][-1].strip().startswith("the training step cannot")


def test_reports_without_these_facts_have_no_sections() -> None:
    assert summary_lines({}) == [] and forecast_lines({}) == []
    assert "Model summary" not in _text({}) and "Memory forecast" not in _text({})
