"""Odd ends made clear: deep baselines, custom BaseExceptions, closure optimizers, fork."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from torchdoctor.errors import UsageError, UserCodeError
from torchdoctor.static.baseline import load_baseline


def test_a_deeply_nested_baseline_is_a_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    with pytest.raises(UsageError, match="deep.json"):
        load_baseline(path)


def test_a_user_base_exception_is_the_users_error() -> None:
    from torchdoctor._usercode import call_user

    class Boom(BaseException):
        pass

    def explode() -> None:
        raise Boom("factory exploded")

    with pytest.raises(UserCodeError, match="factory exploded"):
        call_user("the factory", explode)
    with pytest.raises(KeyboardInterrupt):
        call_user("the factory", _interrupt)


def _interrupt() -> None:
    raise KeyboardInterrupt


@pytest.mark.needs_torch
def test_check_trains_a_closure_optimizer_without_internal_errors() -> None:
    torch = pytest.importorskip("torch")
    import torchdoctor

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    x = torch.randn(32, 4)
    optimizer = torch.optim.LBFGS(model.parameters(), lr=0.1, max_iter=3)
    report = torchdoctor.check(model, (x, x.sum(1, keepdim=True)), torch.nn.MSELoss(), optimizer)
    assert "TD001" not in report.codes()
    assert optimizer.state_dict()["state"] == {}  # the user's optimizer never stepped


@pytest.mark.skipif(
    not (hasattr(os, "fork") and os.path.exists("/proc/self/statm")), reason="needs fork and procfs"
)
def test_resident_memory_is_read_for_the_forked_child_itself() -> None:
    from torchdoctor.runtime.detectors.memory import resident_bytes

    assert resident_bytes() is not None  # the descriptor is opened in the parent
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        before = resident_bytes() or 0
        held = bytearray(64 << 20)
        held[::4096] = b"\1" * len(held[::4096])
        grown = (resident_bytes() or 0) - before >= 48 << 20  # the parent did not grow
        os.write(write, b"1" if grown else b"0")
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    assert os.read(read, 1) == b"1"
    os.close(read)
