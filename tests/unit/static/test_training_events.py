"""Training events of a loop or a function: the same order and answers whether or not model
calls (``FORWARD``) are asked for, and whichever is asked first."""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Callable

import pytest

from torchdoctor.static.context import FileContext
from torchdoctor.static.training import Event, EventKind, function_events, loop_events
from torchdoctor.static.walker import Walker

TRAINING = """
import torch
from torch import nn
from torch.autograd import backward as bw

model = nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
sched = torch.optim.lr_scheduler.StepLR(opt, 10)

def train_step(x, y):
    out = model(x)
    loss = (out - y).pow(2).mean()
    bw(loss)
    opt.step()
    return loss

for epoch in range(3):
    model.train()
    for x, y in []:
        opt.zero_grad()
        out = model.forward(x)
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        for p in model.parameters():
            p.grad = None
        opt.step()
    sched.step()
    model.eval()
"""


def walked(source: str) -> FileContext:
    text = textwrap.dedent(source)
    ctx = FileContext("train.py", text, ast.parse(text))
    Walker(ctx, structure=True).walk()
    return ctx


def asked_in_order(
    full_first: bool, ask: Callable[[bool], list[Event]]
) -> tuple[list[Event], list[Event]]:
    """The events with and without model calls, the full list asked first or second
    (each answer is cached, so the order could change what the other one reads)."""
    if full_first:
        full = ask(True)
        return full, ask(False)
    without = ask(False)
    return ask(True), without


def described(events: list[Event]) -> list[tuple[EventKind, int]]:
    return [(e.kind, e.line) for e in events]


@pytest.mark.parametrize("full_first", [True, False])
def test_loop_events_without_forwards_are_the_full_list_less_model_calls(
    full_first: bool,
) -> None:
    ctx = walked(TRAINING)
    outer = ctx.module.all_loops[0]
    full, without = asked_in_order(full_first, lambda f: loop_events(ctx, outer, forwards=f))
    kinds = {e.kind for e in full}
    assert EventKind.FORWARD in kinds and EventKind.BACKWARD in kinds
    assert {EventKind.ZERO_GRAD, EventKind.OPTIMIZER_STEP, EventKind.SCHEDULER_STEP} <= kinds
    assert described(without) == [(e.kind, e.line) for e in full if e.kind is not EventKind.FORWARD]


@pytest.mark.parametrize("full_first", [True, False])
def test_function_events_without_forwards_keep_an_aliased_backward(full_first: bool) -> None:
    ctx = walked(TRAINING)
    step = next(f for f in ctx.module.functions if f.name == "train_step")
    full, without = asked_in_order(full_first, lambda f: function_events(ctx, step, forwards=f))
    assert [e.kind for e in full] == [
        EventKind.FORWARD,
        EventKind.BACKWARD,
        EventKind.OPTIMIZER_STEP,
    ]
    assert [e.kind for e in without] == [EventKind.BACKWARD, EventKind.OPTIMIZER_STEP]
