"""The loop facts the TD7xx-TD9xx rules share: periodic guards."""

from __future__ import annotations

import ast

import pytest

from torchdoctor.static.analysis.loops import is_periodic_guard


@pytest.mark.parametrize(
    "test",
    [
        "step % 100 == 0",
        "not i % k",
        "(i + 1) % accumulation == 0",
        "i == 0",
        "batch_idx == len(loader) - 1",
        "epoch == args.epochs",
        "should_step",
        "rank == 0 and step % 10 == 0",
    ],
)
def test_tests_that_hold_only_now_and_then_are_periodic(test: str) -> None:
    assert is_periodic_guard(ast.parse(test, mode="eval").body)


@pytest.mark.parametrize(
    "test",
    [
        "verbose",
        "writer is not None",
        "device.type == 'cuda'",
        "loss > threshold",
        "torch.cuda.is_available()",
        "i != 0",
        "args.log == 'all'",
    ],
)
def test_tests_that_hold_on_every_iteration_are_not_periodic(test: str) -> None:
    assert not is_periodic_guard(ast.parse(test, mode="eval").body)


def test_helpers_that_call_each_other_from_their_loops_end() -> None:
    """A helper whose loop calls an evaluation, defined inside it, whose loop calls the
    helper again (the shape the seeded fuzz test drew): asking whether a loop trains must
    end, and every rule runs."""
    from torchdoctor.static import lint_source

    source = """
scaler.step(optimizer)
def helper(model):
    for i, (x, y) in enumerate(loader):
        def evaluate(model, loader):
            for i, (x, y) in enumerate(loader):
                helper(model)
        evaluate(model, loader)
"""
    report = lint_source(source, path="mutual.py")
    assert not report.facts.get("internal_errors"), report.facts.get("internal_errors")
