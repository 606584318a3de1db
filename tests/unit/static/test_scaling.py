"""Lint's work grows linearly with the file: no step scans every binding of a name.

A long generated function that rebinds a few names thousands of times used to make every
name lookup scan all earlier bindings (19 s on a 4 MB file against 3.3 s for
``ast.parse``). The test counts a deterministic quantity, the bindings examined per lookup,
instead of timing anything.
"""

from __future__ import annotations

import ast
import random

import pytest

from torchdoctor.static import lint_source, names
from torchdoctor.static.context import FileContext
from torchdoctor.static.walker import Walker

_STATEMENTS = (
    "{a} = {b} + {c}",
    "{a} = {b}({c})",
    "{a} = {b}.to({c})",
    "{a}.append({b})",
    "{a} = torch.zeros({b})",
    "{a} += {b}.item()",
    "{a} = {b}.detach()",
)


def generated(lines: int) -> str:
    """A training function whose loop body rebinds 40 names ``lines`` times."""
    rng = random.Random(lines)
    pick = [f"v{i}" for i in range(40)]
    out = ["import torch", "def train(model, loader, optimizer):", "    for x, y in loader:"]
    for _ in range(lines):
        template = rng.choice(_STATEMENTS)
        out.append(
            "        " + template.format(a=rng.choice(pick), b=rng.choice(pick), c=rng.choice(pick))
        )
    out += ["        loss.backward()", "        optimizer.step()", ""]
    return "\n".join(out)


def examined(source: str, monkeypatch: pytest.MonkeyPatch) -> int:
    """How many bindings lint examined while linting ``source``."""
    count = 0
    original = names._encloses

    def counting(binding: names.Binding, position: tuple[int, int]) -> bool:
        nonlocal count
        count += 1
        return original(binding, position)

    monkeypatch.setattr(names, "_encloses", counting)
    lint_source(source, "generated.py")
    return count


@pytest.mark.slow
def test_work_per_line_stays_flat_up_to_a_megabyte(monkeypatch: pytest.MonkeyPatch) -> None:
    small, large = generated(10_000), generated(40_000)
    assert len(large) > 900_000  # about 1 MB of source
    per_line_small = examined(small, monkeypatch) / 10_000
    per_line_large = examined(large, monkeypatch) / 40_000
    # Linear work keeps the per-line count flat; a scan per lookup would grow it 4x.
    assert per_line_large < 1.5 * per_line_small + 1


def test_a_name_rebound_many_times_resolves_to_its_latest_binding() -> None:
    # The binary search keeps lookup's answers: the latest binding before the use, the
    # statement that contains the use skipped (`x = f(x)`), else the first binding after.
    source = "\n".join(
        [
            "def f(model):",
            "    model(x)",
            *[f"    x = g({i})" for i in range(50)],
            "    x = h(x)",
            "    model(x)",
            "",
        ]
    )
    tree = ast.parse(source)
    ctx = FileContext("f.py", source, tree)
    Walker(ctx, structure=True).walk()
    scope = ctx.function_index["f"]
    uses = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Name) and n.id == "x" and isinstance(n.ctx, ast.Load)
    ]
    answers = {
        use.lineno: ctx.segment(ctx.lookup(use, scope)[0].value)  # type: ignore[index,arg-type]
        for use in uses
    }
    assert answers == {2: "g(0)", 53: "g(49)", 54: "h(x)"}
