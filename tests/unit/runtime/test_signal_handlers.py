"""An exception raised by the user's own signal handler while the monitor's code runs is the
user's: it reaches their program, and is never taken for a failure of torchdoctor (TD001).

torch's DataLoader raises "worker killed" from its SIGCHLD handler wherever the main thread
happens to be, which is sometimes inside a detector.
"""

from __future__ import annotations

import os
import signal

import pytest

import torchdoctor
from torchdoctor._kernel import raised_by_signal_handler
from torchdoctor.custom import CustomRule, Detector
from torchdoctor.findings import Severity

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.needs_torch,
    pytest.mark.skipif(not hasattr(signal, "SIGUSR1"), reason="POSIX signals"),
]

KILLED = "DataLoader worker (pid 1) is killed by signal: Segmentation fault."


class SignalledDuringAHook(Detector):
    """Sends SIGUSR1 to its own process inside a hook and waits for the handler to run."""

    rules = (CustomRule("TDX401", "signalled", Severity.INFO, "A hook interrupted by a signal"),)

    def __init__(self, fired: list[int]) -> None:
        self.fired = fired

    def on_step_end(self, event) -> None:
        if event.step == 2 and not self.fired:
            os.kill(os.getpid(), signal.SIGUSR1)
            while not self.fired:  # the handler runs at a bytecode boundary of this loop
                pass


def _handler(fired: list[int]):
    def handler(signum: int, frame: object) -> None:
        fired.append(signum)
        raise RuntimeError(KILLED)

    return handler


def test_the_users_signal_handler_exception_reaches_their_code_not_a_td001() -> None:
    fired: list[int] = []
    previous = signal.signal(signal.SIGUSR1, _handler(fired))
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    try:
        with (
            pytest.raises(RuntimeError, match="killed by signal"),
            torchdoctor.watch(model, optimizer, detectors=[SignalledDuringAHook(fired)]) as w,
        ):
            for _ in range(5):
                optimizer.zero_grad()
                model(torch.randn(8, 4)).sum().backward()
                optimizer.step()
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert fired == [signal.SIGUSR1]
    assert not w.report.by_code("TD001")


def test_an_ordinary_exception_is_not_taken_for_a_signal_handlers() -> None:
    try:
        raise ValueError("a bug of ours")
    except ValueError as error:
        assert not raised_by_signal_handler(error)


def test_an_exception_raised_in_an_installed_handler_is_recognised() -> None:
    fired: list[int] = []
    handler = _handler(fired)
    previous = signal.signal(signal.SIGUSR1, handler)
    try:
        handler(signal.SIGUSR1, None)
    except RuntimeError as error:
        assert raised_by_signal_handler(error)
    finally:
        signal.signal(signal.SIGUSR1, previous)


def _interrupted(fired: list[int]):
    """A callback of ours that the signal interrupts."""

    def callback(*args: object, **kwargs: object) -> None:
        os.kill(os.getpid(), signal.SIGUSR1)
        while not fired:
            pass

    return callback


def test_a_deferred_read_back_interrupted_by_the_users_handler_lets_it_through() -> None:
    from torchdoctor.runtime.readback import Readback

    fired: list[int] = []
    ours: list[BaseException] = []
    previous = signal.signal(signal.SIGUSR1, _handler(fired))
    try:
        readback = Readback(torch, lambda callback, error: ours.append(error))
        with pytest.raises(RuntimeError, match="killed by signal"):
            readback.submit(torch.ones(2), _interrupted(fired))
            readback.flush()
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert fired == [signal.SIGUSR1] and ours == []


def test_a_patched_call_interrupted_by_the_users_handler_lets_it_through() -> None:
    from torchdoctor.runtime.patches import Patches, after_call, before_call

    for maker in (after_call, before_call):
        fired: list[int] = []
        ours: list[BaseException] = []
        patches = Patches()
        wrapped = maker(patches, _interrupted(fired), ours.append)(lambda x: x + 1)
        previous = signal.signal(signal.SIGUSR1, _handler(fired))
        try:
            with pytest.raises(RuntimeError, match="killed by signal"):
                wrapped(1)
        finally:
            signal.signal(signal.SIGUSR1, previous)
        assert fired == [signal.SIGUSR1] and ours == [] and patches.live()
