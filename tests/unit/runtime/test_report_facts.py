"""Report facts are final when the run ends: a progress write made during the run (the
report file `torchdoctor run` keeps up to date) does not freeze them."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

pytestmark = pytest.mark.needs_torch
torch = pytest.importorskip("torch")

from torchdoctor.findings import Depth, Location, Report  # noqa: E402
from torchdoctor.rules.registry import finding  # noqa: E402
from torchdoctor.runtime import monitor as monitor_module  # noqa: E402


class _Clock:
    """perf_counter that moves one second per reading: durations without real time."""

    def __init__(self) -> None:
        self._ticks = itertools.count(start=100)

    def perf_counter(self) -> float:
        return float(next(self._ticks))


def test_duration_is_the_whole_run_not_the_first_progress_write(monkeypatch: Any) -> None:
    clock = _Clock()
    monkeypatch.setattr(monitor_module.time, "perf_counter", clock.perf_counter)
    written: list[Report] = []
    monitor = monitor_module.Monitor(monitor_module.MonitorOptions(progress=written.append))
    monitor.attach()
    early = finding("TD612", "an early finding", Location(object="loss"), Depth.RUN)
    monitor.dispatch.findings[early.merge_key] = early
    monitor.progress()  # the first periodic write, early in the run
    monitor.dispatch.findings.clear()
    for _ in range(20):
        clock.perf_counter()  # the run goes on
    report = monitor.finish()
    assert written and report.facts["duration_s"] > written[0].facts["duration_s"] + 10


def test_duration_does_not_grow_after_the_run_ended(monkeypatch: Any) -> None:
    clock = _Clock()
    monkeypatch.setattr(monitor_module.time, "perf_counter", clock.perf_counter)
    monitor = monitor_module.Monitor(monitor_module.MonitorOptions())
    monitor.attach()
    final = monitor.finish().facts["duration_s"]
    for _ in range(5):
        clock.perf_counter()
    assert monitor._report().facts["duration_s"] == final
