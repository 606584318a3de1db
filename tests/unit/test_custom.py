"""Users' own detectors and probes: declared TDX rules, one report, one selection."""

from __future__ import annotations

import json

import pytest

import torchdoctor
from torchdoctor.custom import CustomRule, Detector, Probe
from torchdoctor.findings import Severity
from torchdoctor.report import render

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.needs_torch
nn = torch.nn

BIG_STEP = CustomRule(
    "TDX001",
    "step-count-seen",
    Severity.WARNING,
    "The run reached a step the project wants to know about",
)
TOO_WIDE = CustomRule(
    "TDX002",
    "model-too-wide",
    Severity.ERROR,
    "The model has more parameters than the project allows",
)


class StepCounter(Detector):
    rules = (BIG_STEP,)

    def on_step_end(self, event) -> None:
        if event.step >= 3:
            self.emit(
                self.finding(
                    "TDX001", f"step {event.step} reached", fix_hint="Nothing to fix: a test rule."
                )
            )


class Broken(Detector):
    rules = (CustomRule("TDX003", "always-broken", Severity.INFO, "A detector that fails"),)

    def on_step_end(self, event) -> None:
        raise ZeroDivisionError("user bug")


class WidthLimit(Probe):
    rules = (TOO_WIDE,)

    def __init__(self, limit: int) -> None:
        self.limit = limit

    def check(self, ctx):
        count = sum(p.numel() for p in ctx.model.parameters())
        if count > self.limit:
            yield self.finding("TDX002", f"{count} parameters, over {self.limit}")


def _train(steps: int = 5, **options) -> torchdoctor.Report:
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with torchdoctor.watch(model, optimizer, **options) as w:
        for _ in range(steps):
            optimizer.zero_grad()
            nn.functional.cross_entropy(
                model(torch.randn(8, 4)), torch.randint(0, 2, (8,))
            ).backward()
            optimizer.step()
    return w.report


def _check(**options) -> torchdoctor.Report:
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    batch = (torch.randn(8, 4), torch.randint(0, 2, (8,)))
    return torchdoctor.check(
        model,
        batch,
        nn.CrossEntropyLoss(),
        torch.optim.SGD(model.parameters(), lr=0.1),
        select=["TDX"],
        **options,
    )


def test_a_user_detector_reports_through_the_same_report() -> None:
    report = _train(detectors=[StepCounter()])
    (found,) = report.by_code("TDX001")
    assert found.severity is Severity.WARNING and found.depth is torchdoctor.Depth.RUN
    data = json.loads(render(report, "json"))
    (item,) = [f for f in data["findings"] if f["code"] == "TDX001"]
    assert item["name"] == "step-count-seen"
    for fmt in ("text", "concise", "sarif", "github", "junit"):
        assert "TDX001" in render(report, fmt)
    assert torchdoctor.get_rule("TDX001").summary == BIG_STEP.summary


def test_a_user_detector_that_stays_quiet_reports_nothing() -> None:
    assert not _train(steps=2, detectors=[StepCounter()]).by_code("TDX001")


@pytest.mark.parametrize(
    "options", [{"ignore": ["TDX"]}, {"select": ["TD2"]}, {"ignore": ["TDX001"]}]
)
def test_selection_applies_to_user_codes(options: dict[str, list[str]]) -> None:
    assert not _train(detectors=[StepCounter()], **options).by_code("TDX001")


def test_a_failing_user_detector_is_one_td001_and_the_rest_carry_on() -> None:
    report = _train(detectors=[Broken(), StepCounter()])
    (internal,) = report.by_code("TD001")
    assert "Broken" in internal.message and "user bug" in internal.message
    assert report.by_code("TDX001")


@pytest.mark.parametrize(
    "bad, words",
    [
        (StepCounter, "pass an instance"),
        (object(), "torchdoctor.custom.Detector"),
    ],
)
def test_what_is_not_a_detector_is_refused(bad: object, words: str) -> None:
    with pytest.raises(torchdoctor.UsageError, match=words):
        _train(detectors=[bad])


def test_a_detector_without_rules_is_refused() -> None:
    class Silent(Detector):
        pass

    with pytest.raises(torchdoctor.UsageError, match="declares no rule"):
        _train(detectors=[Silent()])


@pytest.mark.parametrize(
    "code, name, words",
    [
        ("TD999", "x", "TDX plus three digits"),
        ("TDX1", "x", "TDX plus three digits"),
        ("TDX010", "Not Kebab", "kebab-case"),
    ],
)
def test_custom_rules_keep_to_the_reserved_range(code: str, name: str, words: str) -> None:
    with pytest.raises(torchdoctor.UsageError, match=words):
        CustomRule(code, name, Severity.INFO, "summary")


def test_a_code_declared_twice_differently_is_refused() -> None:
    class Clash(Detector):
        rules = (CustomRule("TDX001", "another-name", Severity.INFO, "other"),)

    with pytest.raises(torchdoctor.UsageError, match="declared twice"):
        _train(detectors=[StepCounter(), Clash()])


def test_a_user_probe_reports_in_check() -> None:
    report = _check(probes=[WidthLimit(limit=5)])
    (found,) = report.by_code("TDX002")
    assert found.depth is torchdoctor.Depth.CHECK and "10 parameters" in found.message


def test_a_user_probe_that_stays_quiet_reports_nothing() -> None:
    assert not _check(probes=[WidthLimit(limit=1000)]).by_code("TDX002")


def test_a_user_probe_is_selected_like_any_probe() -> None:
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    report = torchdoctor.check(
        model,
        (torch.randn(8, 4), torch.randint(0, 2, (8,))),
        nn.CrossEntropyLoss(),
        ignore=["TDX002"],
        probes=[WidthLimit(limit=5)],
    )
    assert not report.by_code("TDX002")


def test_a_failing_user_probe_is_one_td001() -> None:
    class Failing(Probe):
        rules = (TOO_WIDE,)

        def check(self, ctx):
            raise KeyError("probe bug")

    report = _check(probes=[Failing(), WidthLimit(limit=5)])
    (internal,) = report.by_code("TD001")
    assert "Failing" in internal.message
    assert report.by_code("TDX002")


def test_what_is_not_a_probe_is_refused() -> None:
    with pytest.raises(torchdoctor.UsageError, match="torchdoctor.custom.Probe"):
        _check(probes=[lambda ctx: []])
