"""check ends whatever the user's code does: a wall-clock budget per probe."""

from __future__ import annotations

import threading

import pytest

pytestmark = pytest.mark.needs_torch
torch = pytest.importorskip("torch")

import torchdoctor  # noqa: E402
from torchdoctor.errors import UsageError, UserCodeError  # noqa: E402
from torchdoctor.preflight.budget import lingering_threads, probe_budget, probe_timeout  # noqa: E402

FOREVER = threading.Event()  # never set: waiting on it blocks until the budget runs out
# Long enough that the work before the blocking call (imports, the fake-tensor summary) never
# spends it on a loaded machine, so the budget always runs out where the test blocks.
BUDGET = 5.0


class Blocking(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        FOREVER.wait()
        return self.fc(x)


class NeverYields(torch.utils.data.IterableDataset):  # type: ignore[type-arg]
    def __iter__(self):  # type: ignore[no-untyped-def]
        FOREVER.wait()
        yield torch.zeros(4), torch.zeros(1)


@pytest.mark.slow
def test_a_forward_that_blocks_ends_the_check_naming_where() -> None:
    batch = (torch.zeros(2, 4), torch.zeros(2, 1))
    with pytest.raises(UserCodeError, match=r"budget while waiting in .*forward") as raised:
        torchdoctor.check(Blocking(), batch, torch.nn.MSELoss(), timeout=BUDGET)
    assert "test_budget.py" in str(raised.value)


@pytest.mark.slow
def test_a_loader_that_never_yields_ends_the_check() -> None:
    loader = torch.utils.data.DataLoader(NeverYields(), batch_size=2)
    with pytest.raises(UserCodeError, match="__iter__"):
        torchdoctor.check(torch.nn.Linear(4, 1), loader, torch.nn.MSELoss(), timeout=BUDGET)


def test_an_except_exception_in_user_code_does_not_swallow_the_timeout() -> None:
    def stubborn() -> None:
        for _ in range(2):
            try:
                FOREVER.wait()
            except Exception:  # noqa: BLE001 - what careless user code does
                continue

    with (
        probe_timeout(0.3),
        pytest.raises(UserCodeError, match="stubborn"),
        probe_budget("stubborn"),
    ):
        stubborn()


def test_a_quick_probe_is_untouched_and_no_timer_is_left() -> None:
    import signal

    outer = signal.getitimer(signal.ITIMER_REAL)  # pytest-timeout's, if it uses one
    with probe_timeout(3600 * 24), probe_budget("quick"):
        total = sum(range(10))
    assert total == 45
    assert (signal.getitimer(signal.ITIMER_REAL)[0] > 0) == (outer[0] > 0)


def test_no_budget_means_no_timer_of_ours() -> None:
    import signal

    outer = signal.getitimer(signal.ITIMER_REAL)
    with probe_timeout(0), probe_budget("free"):
        assert signal.getitimer(signal.ITIMER_REAL)[0] <= outer[0]
    with pytest.raises(UsageError), probe_timeout(-1):
        pass


def test_lingering_threads_are_the_new_non_daemon_ones() -> None:
    before = set(threading.enumerate())
    release = threading.Event()
    daemon = threading.Thread(target=release.wait, daemon=True)
    worker = threading.Thread(target=release.wait, name="left-running")
    daemon.start()
    worker.start()
    try:
        assert lingering_threads(before) == ["left-running"]
    finally:
        release.set()
        worker.join()
        daemon.join()
    assert lingering_threads(before) == []
