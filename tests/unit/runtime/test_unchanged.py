"""A watched model and optimizer stay what they were: picklable, copyable, scriptable, and
any dtype of parameter or buffer is measured without failing the monitor."""

from __future__ import annotations

import copy
import io
import pickle

import pytest

pytestmark = pytest.mark.needs_torch
torch = pytest.importorskip("torch")
nn = torch.nn

import torchdoctor  # noqa: E402
from tests.unit.runtime.training import mlp, step  # noqa: E402
from torchdoctor.findings import INTERNAL_ERROR_CODE  # noqa: E402
from torchdoctor.runtime.stats import norms  # noqa: E402


def saved_bytes(obj: object) -> bytes:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


@pytest.mark.parametrize("localise", [False, True])
def test_a_watched_model_pickles_and_copies_as_an_unwatched_one(localise: bool) -> None:
    torch.manual_seed(0)
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    with torchdoctor.watch(localise_non_finite=localise) as w:
        for _ in range(3):
            step(model, optimizer)
        assert not model._forward_pre_hooks and not model._forward_hooks
        assert not any(m._forward_hooks or m._forward_pre_hooks for m in model.modules())
        watched = saved_bytes(model)
        twin = copy.deepcopy(model)
        state = pickle.loads(pickle.dumps(optimizer.state_dict()))
        pickle.dumps(optimizer)
        copy.deepcopy(optimizer)
    assert saved_bytes(model) == watched  # the very same bytes as outside the watch
    assert all(
        torch.equal(a, b) for a, b in zip(twin.parameters(), model.parameters(), strict=True)
    )
    assert state["param_groups"][0]["momentum"] == 0.9
    assert not [f for f in w.report.findings if f.code == INTERNAL_ERROR_CODE]


@pytest.mark.parametrize("dtype", ["float64", "float16", "bfloat16", "complex64", "complex128"])
def test_any_parameter_dtype_is_watched_without_failure(dtype: str) -> None:
    kind = getattr(torch, dtype)
    torch.manual_seed(0)
    model = nn.Linear(4, 2).to(kind)
    model.register_buffer("count", torch.zeros(3, dtype=torch.int64))
    model.frozen = nn.Parameter(torch.ones(3, dtype=torch.int32), requires_grad=False)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with torchdoctor.watch(sample_every=1) as w:
        for _ in range(4):
            optimizer.zero_grad()
            model(torch.randn(8, 4).to(kind)).abs().pow(2).float().mean().backward()
            optimizer.step()
    assert w.step == 4
    assert not [f for f in w.report.findings if f.code == INTERNAL_ERROR_CODE]


def test_norms_are_float32_and_in_order_for_mixed_dtypes() -> None:
    tensors = [
        torch.full((4,), 2.0, dtype=torch.float64),
        torch.full((4,), 1.0),
        torch.full((1,), 3 + 4j, dtype=torch.complex64),
        torch.full((4,), 3, dtype=torch.int64),
        torch.ones(4, dtype=torch.bool),
        torch.full((4,), 1.0, dtype=torch.bfloat16),
    ]
    with torch.no_grad():
        result = norms(torch, tensors)
    assert result.dtype == torch.float32
    assert result.tolist() == pytest.approx([4.0, 2.0, 5.0, 6.0, 2.0, 2.0])


def test_norms_of_only_wide_dtypes() -> None:
    with torch.no_grad():
        result = norms(torch, [torch.full((9,), 1.0, dtype=torch.float64)])
    assert result.tolist() == [3.0]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_a_watched_model_can_be_scripted_and_traced() -> None:
    torch.manual_seed(0)
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with torchdoctor.watch() as w:
        step(model, optimizer)
        scripted = torch.jit.script(model)
        traced = torch.jit.trace(model, torch.zeros(2, 8))
        x = torch.randn(2, 8)
        assert torch.equal(scripted(x), model(x)) and torch.equal(traced(x), model(x))
    assert not [f for f in w.report.findings if f.code == INTERNAL_ERROR_CODE]


def test_a_watch_started_and_never_stopped_does_not_block_the_next() -> None:
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    first = torchdoctor.watch().start()
    step(model, optimizer)
    second = torchdoctor.watch().start()  # a notebook cell run again
    step(model, optimizer)
    assert first.step == 1 and first.report.facts["steps"] == 1
    assert second.stop().facts["steps"] == 1
    assert first.stop() is first.report


def test_a_failure_inside_finish_leaves_no_detector_patch_behind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from torchdoctor.runtime import monitor as monitor_module
    from torchdoctor.runtime import patches

    def broken(self: object, exc: object) -> None:
        raise RuntimeError("broken finish")  # no detector reaches its on_finish

    clip = torch.nn.utils.clip_grad_norm_
    monitor = monitor_module.Monitor()
    monitor.attach()
    installed: dict[tuple[int, str], tuple[object, str, object]] = {}
    for _, owner, name, was, _ in patches._INSTALLED:  # oldest first: the first is torch's
        installed.setdefault((id(owner), name), (owner, name, was))
    assert torch.nn.utils.clip_grad_norm_ is not clip and installed
    monkeypatch.setattr(monitor_module.Monitor, "_finish", broken)
    monitor.finish()
    assert torch.nn.utils.clip_grad_norm_ is clip
    for owner, name, was in installed.values():  # an attribute a patch added is gone again
        if was is patches._ABSENT:
            assert name not in vars(owner)
        else:
            assert getattr(owner, name) is was
    with torchdoctor.watch():  # the next run wraps torch's own function, not a leftover
        assert torch.nn.utils.clip_grad_norm_.__wrapped__ is clip
    assert torch.nn.utils.clip_grad_norm_ is clip


def test_a_with_block_still_refuses_a_nested_watch() -> None:
    with torchdoctor.watch(), pytest.raises(torchdoctor.UsageError):
        torchdoctor.watch().start()


def test_a_failure_inside_finish_is_a_finding_and_leaves_nothing_behind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from torchdoctor.runtime import monitor as monitor_module

    def broken(self: object, exc: object) -> None:
        raise RuntimeError("broken finish")

    before = torch.autograd.backward
    monitor = monitor_module.Monitor()
    monitor.attach()
    assert torch.autograd.backward is not before
    monkeypatch.setattr(monitor_module.Monitor, "_finish", broken)
    report = monitor.finish()
    assert [f.code for f in report.findings] == [INTERNAL_ERROR_CODE]
    assert "broken finish" in report.findings[0].message
    assert monitor_module.active_monitor() is None and torch.autograd.backward is before
    assert monitor.finish() is report
    with torchdoctor.watch():  # the process can be watched again
        pass
