"""The one model of training events and its two views: what each view sees, and how far
both follow calls into the file's helpers (the same limit, the same mechanism)."""

from __future__ import annotations

import ast
import textwrap

from torchdoctor.static.analysis.events import MAX_CALL_DEPTH, MODE_VIEW, STEP_VIEW, Kind
from torchdoctor.static.analysis.mode_actions import expand
from torchdoctor.static.analysis.step_sequences import sequences
from torchdoctor.static.context import FileContext
from torchdoctor.static.training import EventKind
from torchdoctor.static.walker import Walker


def walked(source: str) -> FileContext:
    text = textwrap.dedent(source)
    ctx = FileContext("train.py", text, ast.parse(text))
    Walker(ctx, structure=True).walk()
    return ctx


def chain(depth: int) -> str:
    """A training loop whose optimizer step and ``model.eval()`` happen ``depth`` helper
    calls below the loop body: ``loop -> h1() -> h2() -> ... -> opt.step()``."""
    lines = [
        "import torch",
        "from torch import nn",
        "model = nn.Linear(4, 2)",
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)",
    ]
    for level in range(1, depth):
        lines += [f"def h{level}():", f"    h{level + 1}()"]
    lines += [f"def h{depth}():", "    opt.step()", "    model.eval()"]
    lines += ["def train():", "    for _ in range(3):", "        h1()"]
    return "\n".join(lines) + "\n"


def loop_kinds(ctx: FileContext) -> tuple[list[Kind], list[EventKind]]:
    """The step view and the mode view of the loop in ``train()``."""
    loop = ctx.module.all_loops[0]
    body = next(b for b in sequences(ctx) if b.loop is loop)
    steps = [a.kind for a in body.actions]
    modes = [a.kind for a in expand(ctx, list(loop.items), loop.function)]
    return steps, modes


def test_every_event_kind_is_seen_by_a_view() -> None:
    """A new kind of event must be given a place in a view, or it is seen by no analysis."""
    assert set(EventKind) == set(STEP_VIEW) | set(MODE_VIEW)


def test_the_views_map_steps_as_documented() -> None:
    assert STEP_VIEW[EventKind.OPTIMIZER_STEP] is Kind.STEP
    assert MODE_VIEW[EventKind.OPTIMIZER_STEP] is EventKind.BACKWARD
    assert EventKind.ZERO_GRAD not in MODE_VIEW
    assert EventKind.EVAL not in STEP_VIEW


def test_both_views_follow_helpers_to_the_same_depth() -> None:
    steps, modes = loop_kinds(walked(chain(MAX_CALL_DEPTH)))
    assert steps == [Kind.STEP]
    assert modes == [EventKind.BACKWARD, EventKind.EVAL]


def test_neither_view_reads_past_the_depth_limit() -> None:
    ctx = walked(chain(MAX_CALL_DEPTH + 1))
    assert not any(b.loop is ctx.module.all_loops[0] for b in sequences(ctx))
    loop = ctx.module.all_loops[0]
    assert expand(ctx, list(loop.items), loop.function) == []


def test_recursive_helpers_are_read_once() -> None:
    ctx = walked(
        """
        import torch
        from torch import nn
        model = nn.Linear(4, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        def step():
            opt.step()
            step()
        def train():
            for _ in range(3):
                step()
        """
    )
    steps, modes = loop_kinds(ctx)
    assert steps == [Kind.STEP]
    assert modes == [EventKind.BACKWARD]
