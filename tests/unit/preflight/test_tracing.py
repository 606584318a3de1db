"""The forward trace names the module that produced a tensor (the loss's input)."""

from __future__ import annotations

import weakref

import pytest

pytestmark = pytest.mark.needs_torch
torch = pytest.importorskip("torch")

from torchdoctor.preflight.tracing import ForwardTrace  # noqa: E402


def test_the_innermost_module_is_the_producer() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    with ForwardTrace(model) as trace:
        output = model(torch.randn(3, 4))
    assert trace.producer_of(output) == "2"  # the last Linear, not the Sequential around it


def test_a_record_of_a_freed_tensor_does_not_hide_a_new_one_with_its_id() -> None:
    # A freed intermediate's address (its id) is reused by a later tensor; whether that
    # happens depends on the allocator's state, so the reuse is set up by hand here.
    model = torch.nn.Linear(4, 2)
    trace = ForwardTrace(model)
    gone = torch.zeros(1)
    dead = weakref.ref(gone)
    del gone
    output = torch.ones(2)
    trace._outputs[id(output)] = (dead, "stale")
    trace._after(model, (), output)
    assert trace.producer_of(output) == ""  # the model itself, recorded afresh
