"""The probe engine: isolation of failing probes, selection, state restored between probes."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

from torchdoctor.findings import Depth, Location  # noqa: E402
from torchdoctor.preflight.context import CheckContext  # noqa: E402
from torchdoctor.preflight.engine import run_probes  # noqa: E402
from torchdoctor.preflight.failures import SharedWorkFailed  # noqa: E402
from torchdoctor.preflight.registry import ProbeInfo  # noqa: E402
from torchdoctor.rules.registry import finding  # noqa: E402
from torchdoctor.rules.selection import Selection  # noqa: E402

pytestmark = pytest.mark.needs_torch


def _context(**options) -> CheckContext:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    batch = (torch.randn(16, 4), torch.randint(0, 3, (16,)))
    return CheckContext(model, batch, nn.CrossEntropyLoss(), **options)


def _reports(code: str, text: str = "found"):
    def probe(ctx, out):
        out.emit(finding(code, text, Location(object="x"), Depth.CHECK))

    return probe


def _raises(ctx, out):
    raise ZeroDivisionError("our bug")


def test_a_failing_probe_becomes_one_internal_error_and_the_rest_carry_on() -> None:
    probes = [ProbeInfo(("TD211",), _raises), ProbeInfo(("TD208",), _reports("TD208"))]
    report = run_probes(_context(), probes)
    assert report.codes() == {"TD001", "TD208"}
    internal = report.by_code("TD001")[0]
    assert "_raises" in internal.message and "ZeroDivisionError: our bug" in internal.message
    assert "TD211" in internal.message
    assert report.exit_code() == 2
    assert "ZeroDivisionError" in report.facts["internal_errors"][0]


def test_probes_of_disabled_codes_do_not_run() -> None:
    probes = [ProbeInfo(("TD211",), _raises), ProbeInfo(("TD208",), _reports("TD208"))]
    report = run_probes(_context(selection=Selection.from_options(ignore=["TD211"])), probes)
    assert report.codes() == {"TD208"}


def test_findings_of_disabled_codes_are_dropped_from_multi_code_probes() -> None:
    def both(ctx, out):
        _reports("TD211")(ctx, out)
        _reports("TD212")(ctx, out)

    report = run_probes(
        _context(selection=Selection.from_options(select=["TD212"])),
        [ProbeInfo(("TD211", "TD212"), both)],
    )
    assert report.codes() == {"TD212"}


def test_explained_failures_are_kept_only_for_codes_no_probe_reported() -> None:
    def fails(code):
        def probe(ctx, out):
            raise SharedWorkFailed(
                finding(code, "from the failure", Location(object="f"), Depth.CHECK)
            )

        return probe

    probes = [
        ProbeInfo(("TD101",), fails("TD101")),
        ProbeInfo(("TD104",), fails("TD104")),
        ProbeInfo(("TD104",), _reports("TD104", "from the probe")),
    ]
    report = run_probes(_context(), probes)
    assert [f.message for f in report.by_code("TD104")] == ["from the probe"]
    assert [f.message for f in report.by_code("TD101")] == ["from the failure"]


def test_each_probe_sees_the_users_state_not_the_previous_probes() -> None:
    seen = []

    def vandal(ctx, out):
        with torch.no_grad():
            ctx.model[0].weight.fill_(7.0)
        ctx.model.eval()

    def witness(ctx, out):
        seen.append((float(ctx.model[0].weight.detach().abs().max()), ctx.model.training))

    run_probes(_context(), [ProbeInfo(("TD211",), vandal), ProbeInfo(("TD212",), witness)])
    assert seen[0][0] < 7.0 and seen[0][1] is True


def test_facts_record_timings_device_and_batch() -> None:
    ctx = _context()

    def touches_the_train_pass(ctx, out):
        assert ctx.train_pass.loss is not None

    report = run_probes(ctx, [ProbeInfo(("TD211",), touches_the_train_pass)])
    assert report.facts["device"] == "cpu"
    assert report.facts["batch"] == {"inputs": [16, 4], "targets": [16]}
    assert set(report.facts["probe_seconds"]) == {"test_engine.touches_the_train_pass"}
    assert report.command == "check"


def test_probes_run_with_the_chosen_thread_count_and_the_users_is_put_back(monkeypatch) -> None:
    from torchdoctor.preflight import engine

    seen: list[int] = []

    def records(ctx, out):
        seen.append(torch.get_num_threads())
        torch.set_num_threads(3)  # a probe that changes it does not leak

    users = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        monkeypatch.setattr(engine, "fastest_thread_count", lambda ctx: 1)
        report = run_probes(
            _context(), [ProbeInfo(("TD211",), records), ProbeInfo(("TD212",), records)]
        )
        assert seen == [1, 1] and torch.get_num_threads() == 2
        assert report.facts["threads"] == 1
    finally:
        torch.set_num_threads(users)


@pytest.mark.parametrize("slowdown, chosen", [(10.0, 1), (0.8, 1), (0.1, 2)])
def test_the_thread_count_is_the_faster_of_the_users_and_one(monkeypatch, slowdown, chosen) -> None:
    """A forward slower with the user's threads (as a busy machine makes a small model's),
    or barely faster, runs single-threaded; one that threads speed up clearly keeps them."""
    import time

    from torchdoctor.preflight.threads import fastest_thread_count

    clock = iter(range(1000))
    monkeypatch.setattr(
        time,
        "perf_counter",
        lambda: next(clock) * (slowdown if torch.get_num_threads() > 1 else 1.0),
    )
    users = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        assert fastest_thread_count(_context()) == chosen
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(users)
