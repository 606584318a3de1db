"""Input-pipeline-bound training (TD409), on timed events, plus the real DataLoader hook."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.needs_torch
torch = pytest.importorskip("torch")

import torchdoctor  # noqa: E402
from tests.unit.runtime.fakes import FakeMonitor, attach, finish  # noqa: E402
from tests.unit.runtime.training import mlp  # noqa: E402
from torchdoctor.runtime.detectors.base import BatchEvent, LoaderInfo, StepEvent  # noqa: E402
from torchdoctor.runtime.detectors.pipeline import InputPipeline  # noqa: E402


class _Info:
    index = 0
    params = ()


def simulate(
    wait_s: float, compute_s: float, steps: int = 60, workers: int = 0, persistent: bool = False
) -> list:
    """Alternate a batch that waited ``wait_s`` with a step of ``compute_s``."""
    monitor = FakeMonitor()
    detector = attach(InputPipeline(), monitor)
    clock = [0.0]
    detector.clock = lambda: clock[0]  # type: ignore[method-assign]
    info = LoaderInfo(workers, False, persistent, 32, None)
    for index in range(steps):
        clock[0] += wait_s
        detector.on_batch(BatchEvent(info, 1, wait_s, index % 20 == 0, index, clock[0]))
        clock[0] += compute_s
        detector.on_step_end(StepEvent(_Info(), index + 1, index + 1, False))  # type: ignore[arg-type]
    return finish(detector, monitor)


def test_loop_waiting_on_data_most_of_the_time_is_found() -> None:
    [found] = simulate(wait_s=0.04, compute_s=0.01)
    assert found.code == "TD409"
    assert found.evidence["wait_fraction"] == pytest.approx(0.8, abs=0.02)
    assert "num_workers=" in found.fix_hint


def test_advice_follows_the_loader_settings() -> None:
    [found] = simulate(wait_s=0.04, compute_s=0.01, workers=2)
    assert "Raise `num_workers` from 2" in found.fix_hint or "cheaper" in found.fix_hint


def test_compute_bound_loop_is_quiet() -> None:
    assert not simulate(wait_s=0.002, compute_s=0.05)


def test_toy_run_with_little_total_waiting_is_quiet() -> None:
    # 80% waiting, but 0.2 s in all: not worth a finding.
    assert not simulate(wait_s=0.004, compute_s=0.001)


def test_real_dataloader_batches_are_timed() -> None:
    torch.manual_seed(0)
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    data = torch.utils.data.TensorDataset(torch.randn(256, 8), torch.randint(0, 3, (256,)))
    loader = torch.utils.data.DataLoader(data, batch_size=32, shuffle=True)
    with torchdoctor.watch() as w:
        for _ in range(2):
            for x, y in loader:
                optimizer.zero_grad()
                torch.nn.functional.cross_entropy(model(x), y).backward()
                optimizer.step()
    assert w.report.facts["batches"] == 16
    assert 0 <= w.report.facts["input_wait_fraction"] < 1
    assert not w.report.by_code("TD409")
