"""Memory growth (TD706): a straight-line fit over sampled steps, noise left alone."""

from __future__ import annotations

import random

import pytest

pytestmark = pytest.mark.needs_torch
torch = pytest.importorskip("torch")
nn = torch.nn

import torchdoctor  # noqa: E402
from tests.unit.runtime.fakes import FakeMonitor, attach, codes, finish  # noqa: E402
from tests.unit.runtime.training import mlp, step  # noqa: E402
from torchdoctor.runtime.detectors.base import StepEvent  # noqa: E402
from torchdoctor.runtime.detectors.memory import (  # noqa: E402
    MIB,
    MemoryGrowth,
    fit_line,
    resident_bytes,
)


class _Info:
    index = 0


def judge(points: list[int]) -> set[str]:
    """Feed one memory reading per sampled step to the detector."""
    monitor = FakeMonitor()
    detector = attach(MemoryGrowth(), monitor)
    readings = iter(points)
    detector._measure = lambda: next(readings)  # type: ignore[method-assign]
    for index in range(len(points)):
        detector.on_step_end(StepEvent(_Info(), index + 1, index + 1, True))  # type: ignore[arg-type]
    return codes(finish(detector, monitor))


def test_fit_line_slope_and_fit() -> None:
    slope, r2 = fit_line([(1, 10), (2, 20), (3, 30)])
    assert slope == pytest.approx(10) and r2 == pytest.approx(1)
    assert fit_line([(1, 5), (2, 5), (3, 5)]) == (0.0, 0.0)


def test_resident_memory_is_measured() -> None:
    value = resident_bytes()
    assert value is not None and value > 10 * MIB


def test_steady_growth_is_found() -> None:
    base = 500 * MIB
    assert "TD706" in judge([base + step * 2 * MIB for step in range(60)])


def test_allocator_noise_and_startup_growth_are_quiet() -> None:
    rng = random.Random(0)
    base = 500 * MIB
    startup = [base + step * 40 * MIB for step in range(6)]  # optimizer state, caches
    noise = [base + 240 * MIB + rng.randint(-30, 30) * MIB for _ in range(60)]
    assert "TD706" not in judge(startup + noise)


def test_small_steady_growth_is_quiet() -> None:
    base = 500 * MIB
    assert "TD706" not in judge([base + step * 64 * 1024 for step in range(100)])


def test_growth_in_a_real_run_is_found() -> None:
    torch.manual_seed(0)
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    kept = []
    with torchdoctor.watch(sample_every=4) as w:
        for _ in range(120):
            step(model, optimizer)
            kept.append(torch.ones(1024, 1024))  # 4 MiB kept every step
    [found] = w.report.by_code("TD706")
    assert 3 < found.evidence["slope_mib_per_step"] < 5
    assert found.location.object == "process memory"


def test_a_real_run_without_growth_is_quiet() -> None:
    torch.manual_seed(0)
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    with torchdoctor.watch(sample_every=4) as w:
        for _ in range(120):
            step(model, optimizer)
    assert not w.report.by_code("TD706")
    assert w.report.facts["resident_mib"] > 0
