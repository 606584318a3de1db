"""The HTML page's model summary and memory forecast sections, from facts alone (no torch)."""

from __future__ import annotations

import re

import pytest

from torchdoctor.facts import Facts
from torchdoctor.findings import Report
from torchdoctor.report import RenderOptions, render
from torchdoctor.report.svg import Limit, Stack, stacked_bars

GIB = 2**30


def _row(module: str, depth: int, parameters: int = 1000, **extra: object) -> dict:
    return {
        "module": module,
        "type": extra.pop("type", module.rsplit(".", 1)[-1].title()),
        "depth": depth,
        "parameters": parameters,
        "trainable": parameters,
        "buffers": 0,
        "dtype": "float32",
        "device": "cpu",
        "output_shape": [8, 16],
        "activation_bytes": 2**20,
        **extra,
    }


SUMMARY = [
    _row("Net", 0, 1_234_567),
    _row("encoder", 1, 1_000_000),
    _row("encoder.layers", 2, 900_000),
    _row("encoder.layers.0", 3, 450_000),
    _row("encoder.layers.0.<b>attn</b>", 4, 200_000, type="<script>Attn</script>"),
    _row("head", 1, 234_567, output_shape=None, activation_bytes=None),
]


def _point(batch: int, fits: bool | None) -> dict:
    return {
        "batch_size": batch,
        "peak_bytes": (4 + batch) * GIB,
        "fits": fits,
        "breakdown": {
            "parameters": GIB,
            "gradients": GIB,
            "optimizer_state": 2 * GIB,
            "activations": batch * GIB,
            "temporaries": 0,
            "batch": 2**20,
        },
    }


DETAIL = {
    "device": "cuda",
    "amp": "bf16",
    "device_memory": 80 * GIB,
    "usable_bytes": 75 * GIB,
    "largest_batch_size": 71,
    "per_sample_bytes": GIB,
    "top_modules": [{"module": "encoder.<i>layers</i>", "activation_bytes": 3 * GIB}],
    "remedies": [
        {"name": "autocast bf16", "peak_bytes": 50 * GIB, "saving_bytes": 18 * GIB, "fits": True},
        {
            "name": "<u>checkpointing</u>",
            "peak_bytes": 70 * GIB,
            "saving_bytes": -GIB,
            "fits": False,
        },
    ],
    "method": "fake tensors, live bytes by storage",
}


def _page(facts: dict, options: RenderOptions | None = None) -> str:
    # Taken as they are, like the facts of a report read back from JSON: the malformed
    # ones below could not be written by torchdoctor itself.
    report = Report(
        tool_version="0",
        command="check",
        created="2026-01-01T00:00:00+00:00",
        facts=Facts.unchecked(facts),
    )
    return render(report, "html", options or RenderOptions())


def _section(page: str, name: str) -> str:
    match = re.search(rf'<section id="{name}">(.*?)</section>', page, re.S)
    assert match, name
    return match.group(1)


def test_the_summary_is_a_tree_of_modules_folded_below_the_shown_depth() -> None:
    page = _page({"summary": SUMMARY, "shared_parameters": [["a.weight", "b.weight"]]})
    section = _section(page, "model-summary")
    assert "6 modules" in section
    # Modules with children fold; the root and depth-1 ones start open, deeper ones closed.
    assert '<details class="module depth-0" open>' in section
    assert '<details class="module depth-1" open>' in section
    assert '<details class="module depth-2">' in section
    assert '<details class="module depth-3">' in section
    assert section.count("<details") == section.count("</details>") == 4
    # Children sit inside their parent's <details>: head comes after encoder's closes.
    encoder = section.index('title="encoder"')
    head = section.index('title="head"')
    closes = [m.start() for m in re.finditer("</details>", section)]
    assert sum(encoder < c < head for c in closes) == 3
    assert "1.2M" in section and "8 × 16" in section and "1.0 MiB" in section
    assert "Shared (counted once): a.weight, b.weight" in section
    # The facts it shows are not repeated raw in the Facts table.
    assert 'id="facts"' not in page


def test_the_summary_depth_option_decides_what_starts_open() -> None:
    page = _page({"summary": SUMMARY}, RenderOptions(summary_depth=0))
    section = _section(page, "model-summary")
    assert '<details class="module depth-0">' in section and " open>" not in section


def test_module_names_and_types_are_escaped() -> None:
    page = _page({"summary": SUMMARY, "forecast": [_point(8, True)], "forecast_detail": DETAIL})
    assert "<b>attn" not in page and "<script>" not in page and "<i>layers" not in page
    assert "<u>" not in page
    assert "&lt;b&gt;attn&lt;/b&gt;" in page
    assert "&lt;script&gt;Attn&lt;/script&gt;" in page
    assert "encoder.&lt;i&gt;layers&lt;/i&gt;" in page
    assert "&lt;u&gt;checkpointing&lt;/u&gt;" in page


def test_the_forecast_has_a_table_bars_limits_largest_batch_and_remedies() -> None:
    points = [_point(8, True), _point(32, True), _point(96, False)]
    page = _page({"forecast": points, "forecast_detail": DETAIL})
    section = _section(page, "memory-forecast")
    assert "cuda, 80.0 GiB (usable by a step: 75.0 GiB), autocast bf16" in section
    rows = re.findall(r"<tr class=\"(\w[\w-]*)\"><td>(\d+)</td><td>([^<]+)</td>", section)
    assert rows == [
        ("fits", "8", "12.0 GiB"),
        ("fits", "32", "36.0 GiB"),
        ("no-fit", "96", "100.0 GiB"),
    ]
    # Columns only for the parts that hold memory (no temporaries here).
    assert "<th>optimizer state</th>" in section and "<th>temporaries</th>" not in section
    svg = re.search(r"<svg.*?</svg>", section, re.S)
    assert svg is not None
    drawn = svg.group(0)
    assert drawn.count("batch 8<") == drawn.count("batch 96<") == 1
    assert drawn.count('class="segment"') == 3 * 5  # five non-empty parts per batch size
    assert '<text class="bad" x="84" y=' in drawn  # the batch that does not fit
    assert drawn.count('<g class="limit">') == 2  # device memory, and the usable part dashed
    assert "device memory" in drawn and 'stroke-dasharray="4 3"' in drawn
    assert "Largest batch size that fits: 71 (measured; 1.0 GiB per sample)." in section
    assert "<th>encoder.&lt;i&gt;layers&lt;/i&gt;</th><td>3.0 GiB</td>" in section
    assert "<td>autocast bf16</td><td>50.0 GiB</td><td>saves 18.0 GiB</td>" in section
    assert "costs 1.0 GiB" in section
    assert "Method: fake tensors" in section
    assert 'id="facts"' not in page


def test_a_forecast_that_could_not_run_says_why_and_draws_nothing() -> None:
    detail = {"device": "cpu", "device_memory": None, "error": "`nonzero` needs real values"}
    section = _section(_page({"forecast": [], "forecast_detail": detail}), "memory-forecast")
    assert "cpu, memory unknown" in section
    assert "nonzero" in section and "<svg" not in section and "<table" not in section


def test_a_report_without_these_facts_has_no_such_sections() -> None:
    page = _page({"steps": 3})
    assert "model-summary" not in page and "memory-forecast" not in page
    assert "Model summary" not in page and "Memory forecast" not in page


@pytest.mark.parametrize(
    "facts",
    [
        {"summary": []},
        {"summary": "not a list"},
        {"summary": [1, "x", {"no": "module"}]},
        {"forecast": [], "forecast_detail": "not a mapping"},
    ],
)
def test_malformed_facts_render_no_section_and_stay_in_the_facts_table(facts: dict) -> None:
    page = _page(facts)
    assert "model-summary" not in page and "memory-forecast" not in page
    assert 'id="facts"' in page


def test_odd_forecast_values_do_not_break_the_page() -> None:
    points = [
        {"batch_size": 4, "peak_bytes": None, "fits": None, "breakdown": None},
        {"batch_size": 8, "peak_bytes": float("nan"), "fits": "?", "breakdown": {"x_y": 5}},
        {"batch_size": "big"},
    ]
    detail = {**DETAIL, "remedies": [{"name": "r"}, 3], "top_modules": "none"}
    section = _section(_page({"forecast": points, "forecast_detail": detail}), "memory-forecast")
    assert section.count('<tr class="unknown">') == 2
    assert "<th>x y</th>" in section


def test_stacked_bars_place_segments_end_to_end_and_escape_labels() -> None:
    svg = stacked_bars(
        "<title>",
        ["a<", "b"],
        [Stack("<row>", [1.0, 3.0]), Stack("r2", [float("nan"), 2.0], bad=True, total=9.0)],
        [Limit("<cap>", 5.0)],
    )
    assert "<row>" not in svg and "&lt;row&gt;" in svg and "&lt;cap&gt;" in svg
    rects = re.findall(r'<rect class="segment" x="([\d.]+)" y="\d+" width="([\d.]+)"', svg)
    (x1, w1), (x2, w2), (x3, _) = [(float(x), float(w)) for x, w in rects]
    assert x2 == pytest.approx(x1 + w1) and w2 == pytest.approx(3 * w1, abs=0.2)
    assert x3 == x1  # the NaN segment counts as zero and is not drawn
    assert ">9<" in svg  # a given total is written, not the sum
    assert "no positive values" in stacked_bars("t", ["a"], [Stack("r", [0.0])])


def test_the_sections_need_no_script_and_no_network() -> None:
    page = _page({"summary": SUMMARY, "forecast": [_point(8, True)], "forecast_detail": DETAIL})
    lowered = page.lower()
    assert "<script" not in lowered and not re.search(r"\bsrc\s*=", lowered)
    assert "http://" not in lowered and "https://" not in lowered and "url(" not in lowered


def test_each_part_keeps_its_colour_whichever_parts_are_present() -> None:
    def colour_of(point: dict, part: str) -> str:
        section = _section(
            _page({"forecast": [point], "forecast_detail": DETAIL}), "memory-forecast"
        )
        found = re.search(rf'fill="(#[0-9a-f]{{6}})"><title>{part}:', section)
        assert found, part
        return found.group(1)

    full = _point(8, True)
    sparse = {**full, "breakdown": {"activations": GIB}}
    assert colour_of(full, "activations") == colour_of(sparse, "activations")
