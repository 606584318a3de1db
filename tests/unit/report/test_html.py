"""The HTML report: self-contained, escaped, deterministic, with plots and embedded docs."""

from __future__ import annotations

import html
import math
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from syrupy.extensions.single_file import WriteMode

from tests.snapshots.reports import ROOT, TextSnapshot, rich_report
from torchdoctor.findings import Depth, Location, Report, Severity
from torchdoctor.report import FORMATS, RenderOptions, render
from torchdoctor.report.html import render_html
from torchdoctor.report.html_plots import POINTS_PER_LINE, figures
from torchdoctor.rules.registry import finding


class HtmlSnapshot(TextSnapshot):
    """The whole page, stored as an ``.html`` file that opens in a browser."""

    _write_mode = WriteMode.TEXT
    file_extension = "html"


def run_report(steps: int = 10_000) -> Report:
    """A runtime report shaped like a long run: series of every known kind, findings at
    steps, a NaN in the loss."""
    report = Report(
        tool_version="0.1.0",
        command="run",
        created="2026-01-01T00:00:00+00:00",
        facts={
            "steps": steps,
            "duration_s": 812.5,
            "step_time_ms": 81.2,
            "batch_wait_s": 40.1,
            "models": [{"name": "Net", "parameters": 12}],
        },
        exit_status=0,
    )
    loss = [2.3 * math.exp(-i / 3000) + 0.05 * math.sin(i) for i in range(2000)]
    loss[1500] = math.nan
    report.series["loss"] = loss
    report.series["grad_norm"] = [1.0 + 0.5 * math.cos(i / 50) for i in range(steps)]
    for group in range(8):
        report.series[f"grad_norm/layer{group}"] = [0.1 * (group + 1)] * steps
    report.series["lr"] = [min(1.0, i / 500) * 1e-3 for i in range(steps)]
    report.series["data_wait_ms"] = [4.0] * steps
    report.series["compute_ms"] = [77.0 + (i % 7) for i in range(steps)]
    report.add(
        finding(
            "TD212",
            "NaN in `loss` at step 7500",
            Location(path="train.py", line=40),
            Depth.RUN,
            evidence={"first_step": 7500},
        )
    )
    report.add(
        finding(
            "TD409",
            "the loader keeps the step waiting",
            Location(object="loader"),
            Depth.RUN,
            evidence={"step": 1200, "wait_fraction": 0.05},
        )
    )
    return report


def _html(report: Report | None = None, **options: object) -> str:
    return render(
        report or rich_report(),
        "html",
        RenderOptions(root=ROOT, title="torchdoctor lint", **options),
    )  # type: ignore[arg-type]


# --- snapshot ------------------------------------------------------------------------------


def test_rich_report_page_matches_its_snapshot(snapshot) -> None:
    assert _html() == snapshot(extension_class=HtmlSnapshot)


def test_run_report_page_matches_its_snapshot(snapshot) -> None:
    page = render(run_report(steps=300), "html", RenderOptions(title="torchdoctor run train.py"))
    assert page == snapshot(extension_class=HtmlSnapshot)


# --- self-contained and safe -----------------------------------------------------------------


@pytest.mark.parametrize("make", [rich_report, run_report, Report], ids=["lint", "run", "empty"])
def test_page_needs_no_network_and_no_other_file(make) -> None:
    page = render(make(), "html", RenderOptions())
    lowered = page.lower()
    assert "<script" not in lowered
    assert "<link" not in lowered and "@import" not in lowered and "url(" not in lowered
    assert not re.search(r"\bsrc\s*=", lowered)
    assert "http://" not in lowered and "https://" not in lowered
    assert "<iframe" not in lowered and "<object" not in lowered


def test_user_text_is_escaped_everywhere() -> None:
    report = Report(command="run", facts={"steps": 10, "target": "<b>fact</b>"})
    hostile = "<script>alert(1)</script> & `<img src=x>`"
    report.add(
        finding(
            "TD201",
            hostile,
            Location(path="<p>.py", line=1, snippet=hostile, object="<i>obj</i>"),
            Depth.RUN,
            fix_hint=hostile,
            evidence={"<k>": "<v>", "step": 3},
        )
    )
    report.series["<svg>name</svg>"] = [1.0, 2.0]
    report.series["grad_norm/<x>"] = [1.0, 2.0]
    page = render(report, "html", RenderOptions(title="<t>"))
    assert "<script>" not in page and "<img" not in page and "<b>fact" not in page
    assert "<i>obj" not in page and "<p>.py" not in page and "<k>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<code>&lt;img src=x&gt;</code>" in page


def test_every_rule_link_points_at_a_doc_on_the_page() -> None:
    page = _html()
    links = set(re.findall(r'href="#(rule-TD\d{3})"', page))
    anchors = set(re.findall(r'id="(rule-TD\d{3})"', page))
    assert links == anchors == {f"rule-{code}" for code in rich_report().codes()}
    assert "<h4>Why it matters</h4>" in page and "<h4>Detected by</h4>" in page
    assert '<pre><code class="language-python">' in page  # the doc's example, rendered


def test_the_same_report_renders_the_same_page() -> None:
    assert _html(run_report()) == _html(run_report())


def test_html_is_a_registered_format_and_render_html_is_pure() -> None:
    assert FORMATS["html"] == "torchdoctor.report.html:render_html"
    report = rich_report()
    before = [f for f in report.findings]
    assert render_html(report, RenderOptions()) == render_html(report, RenderOptions())
    assert report.findings == before


# --- summary and findings --------------------------------------------------------------------


def test_summary_gives_verdict_counts_by_severity_and_depth_and_run_facts() -> None:
    page = render(run_report(), "html", RenderOptions())
    assert "1 error to fix." in page
    assert "<b>1</b> error<" in page and "<b>1</b> warning<" in page
    assert "<b>2</b> seen by run" in page
    assert "<dt>optimizer steps</dt><dd>10000</dd>" in page
    assert "<dt>data wait (s)</dt><dd>40.1</dd>" in page
    assert "The script exited with status 0." in page


@pytest.mark.parametrize(
    ("severity", "verdict"),
    [
        (None, "No problems found."),
        (Severity.WARNING, "No errors; 1 warning to read."),
        (Severity.INFO, "No errors or warnings; 1 info."),
    ],
)
def test_verdict_names_the_worst_severity(severity: Severity | None, verdict: str) -> None:
    report = Report(command="lint")
    if severity is not None:
        report.add(
            finding("TD206", "m", Location(path="a.py", line=1), Depth.LINT, severity=severity)
        )
    assert verdict in render(report, "html", RenderOptions())


def test_findings_are_grouped_by_severity_with_frame_evidence_fix_and_depths() -> None:
    page = _html()
    errors, warnings, info = (page.index(f">{h} (") for h in ("Errors", "Warnings", "Info"))
    assert errors < warnings < info
    assert page.index("TD203</a>") < warnings < page.index("TD206</a>") < info
    assert '<span class="line marked"><span class="number">31</span>' in page
    assert "^^^^^^^^^^^^^^^^^^^^^" in page  # columns 8 to 29
    assert "<tr><th>backward_line</th><td>30</td></tr>" in page
    assert "<b>Fix:</b> Move <code>optimizer.zero_grad()</code> to the top" in page
    assert '<span class="depth">lint</span>' in page
    assert "auto-fix (unsafe)" in page and "confidence: medium" in page
    assert "src/steps, v2/step.py:12:5" in page and "train.py:31:9" in page
    assert f"{ROOT}/train.py" not in page  # paths relative to the root


def test_source_and_evidence_can_be_left_out() -> None:
    page = _html(show_source=False, show_evidence=False)
    assert 'class="frame"' not in page and 'class="evidence"' not in page


# --- plots -----------------------------------------------------------------------------------


def test_run_plots_cover_each_kind_of_series_with_findings_marked() -> None:
    titles = [figure.title for figure in figures(run_report())]
    assert titles == [
        "Loss",
        "Gradient norm (global and largest module groups)",
        "Learning rate",
        "Step time (ms)",
    ]
    loss = figures(run_report())[0].svg
    assert "TD212" in loss and "TD409" in loss  # markers at steps 7500 and 1200
    assert 'class="nonfinite"' in loss  # the NaN loss is drawn as a cross, not dropped
    assert "2,000 points over 10,000 steps; downsampled to ≤600 (min/max kept)" in loss


def test_long_series_are_downsampled_and_say_so() -> None:
    grad = figures(run_report())[1].svg
    assert f"downsampled to ≤{POINTS_PER_LINE} of 10,000 points (min/max kept)" in grad
    assert "4 largest of 8 module groups" in grad
    for points in re.findall(r'points="([^"]*)"', grad):
        assert len(points.split()) <= POINTS_PER_LINE
    assert "layer7" in grad and "layer0" not in grad  # the largest groups are kept


def test_plots_survive_odd_series() -> None:
    report = Report(command="run", facts={"steps": 1})
    report.series.update(
        {
            "empty": [],
            "nan": [math.nan, math.inf],
            "one": [3.0],
            "text": ["a", 1.0],
            "flat": [2.0, 2.0, 2.0],
        }
    )
    page = render(report, "html", RenderOptions())
    assert "no finite values" in page
    assert page.count('<svg class="plot"') == 4  # every series with a value gets a plot


def test_check_layer_grad_norms_are_drawn_as_bars() -> None:
    report = Report(
        command="check",
        facts={"layer_grad_norms": {f"layers.{i}": 10.0**-i for i in range(40)} | {"dead": 0.0}},
        series={"overfit_loss": [2.0, 1.5, 1.1, 0.8]},
    )
    titles = [figure.title for figure in figures(report)]
    assert titles == [
        "Overfit one batch: loss per step",
        "Gradient norm per layer (one training step)",
    ]
    bars = figures(report)[1].svg
    assert "41 layers; 30 largest shown" in bars
    assert bars.count('class="bar"') == 30


# --- size, CLI and import hygiene ------------------------------------------------------------


def test_a_ten_thousand_step_run_stays_small() -> None:
    assert len(render(run_report(), "html", RenderOptions()).encode()) < 200_000


def test_lint_writes_an_html_report(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from torchdoctor.cli import main

    source = tmp_path / "train.py"
    source.write_text(
        "import torch\nfor x in loader:\n    loss = model(x).sum()\n"
        "    loss.backward()\n    optimizer.step()\n",
        encoding="utf-8",
    )
    out = tmp_path / "out.html"
    result = CliRunner().invoke(main, ["lint", str(source), "--format", "html", "-o", str(out)])
    assert result.exit_code == 1, result.output
    page = out.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and 'id="rule-TD201"' in page


def test_run_report_file_format_follows_its_extension() -> None:
    from torchdoctor.cli.shared import report_file_format

    assert report_file_format(Path("out.HTML")) == "html"
    assert report_file_format(Path("out.htm")) == "html"
    assert report_file_format(Path("out.json")) == "json"
    assert report_file_format(Path("report")) == "json"


def test_html_renders_without_torch() -> None:
    code = textwrap.dedent("""
        import sys
        class _Block:
            def find_spec(self, name, path=None, target=None):
                if name == "torch" or name.startswith("torch.") or name == "numpy":
                    raise ImportError(name)
        sys.meta_path.insert(0, _Block())
        from tests.unit.report.test_html import run_report
        from torchdoctor.report import RenderOptions, render
        page = render(run_report(), "html", RenderOptions())
        assert "torch" not in sys.modules and "<svg" in page
        print("ok")
    """)
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[3],
    )
    assert result.stdout.strip() == "ok", result.stderr


def test_a_report_shows_itself_as_html_in_a_notebook() -> None:
    report = rich_report()
    shown = report._repr_html_()
    frame = re.fullmatch(r'<iframe srcdoc="([^"]*)" [^>]*></iframe>', shown)
    assert frame is not None  # the page's styles stay in its frame, out of the notebook's
    page = html.unescape(frame.group(1))
    assert page == render(report, "html", RenderOptions(title="torchdoctor lint"))
    assert "<title>torchdoctor lint</title>" in page and 'id="rule-TD203"' in page


@pytest.mark.needs_torch
def test_check_records_its_overfit_curve_and_gradient_norms_for_the_page() -> None:
    torch = pytest.importorskip("torch")
    import torchdoctor

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    batch = (torch.randn(16, 8), torch.randint(0, 3, (16,)))
    optimizer = torch.optim.Adam(model.parameters(), 1e-2)
    report = torchdoctor.check(model, batch, torch.nn.CrossEntropyLoss(), optimizer)
    curve = report.series["overfit_loss"]
    assert len(curve) >= 2 and curve[-1] < curve[0]
    assert set(report.facts["layer_grad_norms"]) == {"0.weight", "0.bias", "2.weight", "2.bias"}
    titles = [figure.title for figure in figures(report)]
    assert titles == [
        "Overfit one batch: loss per step",
        "Gradient norm per layer (one training step)",
    ]


def test_series_recorded_at_sampled_steps_are_placed_at_those_steps() -> None:
    report = Report(
        command="run",
        facts={"steps": 1000, "series_steps": {"lr": [1, 2, 3, 100, 1000], "grad_norm": [1, 2]}},
    )
    report.series["lr"] = [0.1, 0.1, 0.1, 0.05, 0.01]
    report.series["grad_norm"] = [1.0, 2.0, 3.0]  # lengths disagree: spread instead
    grad, lr = (f.svg for f in figures(report))
    xs = [float(p.split(",")[0]) for p in re.search(r'points="([^"]*)"', lr).group(1).split()]
    assert max(xs[1] - xs[0], xs[2] - xs[1]) < (xs[3] - xs[2]) / 10  # not evenly spread
    assert "points over" not in lr
    assert "3 points over 1,000 steps" in grad


def test_module_groups_stop_at_the_first_index() -> None:
    from torchdoctor.runtime.detectors.curves import module_group

    assert module_group("encoder.layers.3.attn.q.weight") == "encoder.layers.3"
    assert module_group("features.0.weight") == "features.0"
    assert module_group("bert.embeddings.word_embeddings.weight") == "bert.embeddings"
    assert module_group("head.weight") == "head"
    assert module_group("scale") == "scale"


@pytest.mark.needs_torch
def test_a_watched_run_records_the_curves_the_page_plots() -> None:
    torch = pytest.importorskip("torch")
    import torchdoctor

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    schedule = torch.optim.lr_scheduler.StepLR(optimizer, 10, 0.5)
    data = torch.utils.data.TensorDataset(torch.randn(240, 8), torch.randint(0, 3, (240,)))
    with torchdoctor.watch() as watched:
        for x, y in torch.utils.data.DataLoader(data, batch_size=8):
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
            schedule.step()
    report = watched.report
    assert not report.findings
    steps = report.facts["series_steps"]
    for name in ("grad_norm", "grad_norm/0", "grad_norm/2", "update_ratio", "lr", "memory_mb"):
        assert len(report.series[name]) == len(steps[name]) >= 2, name
    assert len(report.series["step_time_ms"]) == 29  # the gaps between 30 steps
    assert all(
        w <= t
        for w, t in zip(report.series["data_wait_ms"], report.series["step_time_ms"], strict=True)
    )
    lr = dict(zip(steps["lr"], report.series["lr"], strict=True))
    assert lr[min(lr)] == 0.1 and lr[max(lr)] < 0.1  # the schedule's decay, at its steps
    titles = [figure.title for figure in figures(report)]
    assert titles == [
        "Loss",
        "Gradient norm (global and largest module groups)",
        "Update / weight ratio",
        "Learning rate",
        "Memory (MiB)",
        "Step time (ms)",
    ]


def test_facts_read_as_a_person_reads_them_not_as_raw_arrays() -> None:
    report = Report(command="run")
    report.facts["series_steps"] = {"loss": list(range(0, 600, 5)), "lr": [0, 50, 100]}
    page = render(report, "html")
    assert "loss: 120 values, 0 to 595; lr: [0, 50, 100]" in page
    assert "[0, 5, 10, 15" not in page


def test_a_finding_at_another_severity_than_its_rule_says_why_beside_the_doc() -> None:
    from torchdoctor.findings import Confidence

    report = Report(command="run")
    report.add(
        finding(
            "TD201",
            "grads may grow",
            Location(path="train.py", line=3),
            Depth.RUN,
            severity=Severity.INFO,
            confidence=Confidence.LOW,
        )
    )
    page = render(report, "html")
    assert "Reported here as <strong>info</strong>, not the rule's default error" in page
    assert "not conclusive (confidence low)" in page
