"""The pieces of the cross-rank checks that need no second process."""

from __future__ import annotations

import pytest

from torchdoctor.distributed.exchange import Extremes, _finite

torch = pytest.importorskip("torch")


def test_equal_values_agree_and_different_ones_are_named() -> None:
    seen = Extremes([1.0, 2.0, 0.0, -3.0], [1.0, 2.5, 0.0, -3.0])
    assert seen.agree(0) and seen.agree(2) and seen.agree(3)
    assert not seen.agree(1)
    assert seen.differing() == [1]
    assert seen.differing(1, 3) == [0]


def test_rounding_noise_is_not_a_difference() -> None:
    seen = Extremes([1e6], [1e6 * (1 + 1e-12)])
    assert seen.agree(0)
    assert not Extremes([1e6], [1e6 * (1 + 1e-6)]).agree(0)


def test_non_finite_values_are_sent_as_finite_extremes() -> None:
    assert _finite(float("nan")) == 1e300
    assert _finite(float("inf")) == 1e300
    assert _finite(float("-inf")) == -1e300
    assert _finite(2.5) == 2.5


def test_fingerprints_tell_swapped_tensors_apart() -> None:
    from torchdoctor.distributed.detectors import _fingerprint
    from torchdoctor.distributed.replicas import tensor_sums as _sums

    a, b = torch.ones(3), torch.full((2,), 5.0)
    assert _sums([a, b], torch) == [3.0, 10.0]
    assert _fingerprint([3.0, 10.0]) != _fingerprint([10.0, 3.0])
    assert _fingerprint([3.0, 10.0]) == _fingerprint(_sums([a.clone(), b.clone()], torch))
    assert _fingerprint([]) == 0.0


def test_batch_fingerprint_follows_the_contents() -> None:
    from torchdoctor.distributed.tracking import batch_fingerprint

    x, y = torch.arange(6.0).reshape(3, 2), torch.tensor([0, 1, 1])
    same = batch_fingerprint((x.clone(), y.clone()), torch)
    assert batch_fingerprint((x, y), torch) == same
    assert batch_fingerprint((x + 1, y), torch) != same
    assert batch_fingerprint({"input": x, "label": y}, torch) == same
    assert batch_fingerprint(["no tensors"], torch) is None


def test_no_exchange_without_a_group_of_several_ranks() -> None:
    from torchdoctor.distributed.exchange import make_exchange

    assert make_exchange(torch) is None  # no default group in this process


def test_patches_restore_only_what_is_still_theirs() -> None:
    from torchdoctor.distributed.tracking import Patches, after_call

    class Owner:
        @staticmethod
        def call(value: int) -> int:
            return value + 1

    seen: list[int] = []
    original = Owner.call
    patches = Patches()
    patches.wrap(Owner, "call", after_call(patches, lambda r, v: seen.append(r), seen.append))
    assert Owner.call(1) == 2 and seen == [2]
    patches.remove()
    assert Owner.call is original
    patches = Patches()
    patches.wrap(Owner, "call", after_call(patches, lambda r, v: seen.append(r), seen.append))

    def someone_elses(value: int) -> int:
        return value

    Owner.call = staticmethod(someone_elses)  # type: ignore[method-assign]
    patches.remove()
    assert Owner.call is someone_elses


def test_a_failing_callback_never_reaches_the_caller() -> None:
    from torchdoctor.distributed.tracking import Patches, after_call

    class Owner:
        @staticmethod
        def call() -> str:
            return "result"

    errors: list[BaseException] = []

    def broken(result: str) -> None:
        raise RuntimeError("ours")

    patches = Patches()
    patches.wrap(Owner, "call", after_call(patches, broken, errors.append))
    assert Owner.call() == "result"
    assert Owner.call() == "result"
    assert len(errors) == 1  # switched off after the first failure
    patches.remove()


def test_ranks_collect_and_judge_only_at_the_steps_every_rank_checks() -> None:
    """Judging may exchange tensor names, a blocking call: a rank that collected as soon
    as its own side of the exchange completed would block at a step where the other rank
    goes on into DDP's all-reduce, and both would wait until the timeout."""
    from types import SimpleNamespace

    from torchdoctor.distributed.detectors import CrossRankChecks, is_due

    checks = CrossRankChecks()
    optimizer = SimpleNamespace(optimizer=object())
    checks._checked_optimizer = id(optimizer.optimizer)
    collected: list[int] = []
    started: list[int] = []
    step = 0

    class Completed:  # an exchange whose every rank has contributed
        def done(self) -> bool:
            return True

        def result(self) -> None:
            return None

    def start(at: int, _optimizer: object) -> None:
        started.append(at)
        checks._pending = SimpleNamespace(pending=Completed())  # type: ignore[assignment]

    checks._check = start  # type: ignore[method-assign]
    checks._collect = lambda: collected.append(step)  # type: ignore[method-assign]
    for step in range(1, 70):
        checks.on_step_begin(SimpleNamespace(step=step, optimizer=optimizer))  # type: ignore[arg-type]
    due = [s for s in range(1, 70) if is_due(s, checks._every)]
    assert started == due
    assert collected == due[1:]  # each at the next check's step, never in between
