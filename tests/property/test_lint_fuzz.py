"""Lint never raises and never reports an internal error, whatever the input.

Three generators: arbitrary bytes, syntactically valid modules from hypothesmith (grammar
and CST based), and random training-loop-shaped programs built from the statements the
rules care about (backward, step, zero_grad, eval/train, no_grad, accumulation guards,
nested loops, functions, methods), which reach far deeper into the rules than generic code.
"""

from __future__ import annotations

import hypothesmith
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from torchdoctor.static import lint_source

_SETTINGS = settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
        HealthCheck.data_too_large,
    ],
)


def assert_lints_cleanly(source: str | bytes) -> None:
    found = lint_source(source, "fuzz.py")
    internal = [f.message for f in found if f.code == "TD001"]
    assert not internal, internal
    assert lint_source(source, "fuzz.py") == found  # deterministic


@_SETTINGS
@given(st.binary(max_size=400))
def test_arbitrary_bytes(data: bytes) -> None:
    assert_lints_cleanly(data)


@_SETTINGS
@given(hypothesmith.from_grammar())
def test_grammar_generated_modules(source: str) -> None:
    assert_lints_cleanly(source)


@settings(
    max_examples=8,
    deadline=None,
    derandomize=True,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
        HealthCheck.data_too_large,
    ],
)
@given(hypothesmith.from_node())
def test_cst_generated_modules(source: str) -> None:
    assert_lints_cleanly(source)


_STATEMENTS = [
    "loss = criterion(model(x), y)",
    "loss.backward()",
    "optimizer.step()",
    "optimizer.zero_grad()",
    "model.zero_grad()",
    "scheduler.step()",
    "model.eval()",
    "model.train()",
    "model.train(False)",
    "total += loss",
    "history.append(loss)",
    "total += loss.item()",
    "out = model.forward(x)",
    "p.data.clamp_(-1, 1)",
    "p.grad = None",
    "scaler.scale(loss).backward()",
    "scaler.step(optimizer)",
    "evaluate(model, loader)",
    "helper(model)",
    "continue",
    "break",
    "return loss",
    "optimizer.step(closure)",
    "self.opt.step()",
    "self.model(x)",
    "x = self.forward(x)",
    "x = x.double()",
    "stats = torch.tensor(history, dtype=torch.float64)",
    "print(stats.std().item())",
    "history.append(stats)",
    "return stats",
    "model.train() if phase == 'train' else model.eval()",
    "counts[y] += 1",
]
_BLOCKS = [
    "for i, (x, y) in enumerate(loader):",
    "while step < 10:",
    "with torch.no_grad():",
    "with torch.inference_mode():",
    "with torch.enable_grad():",
    "if (i + 1) % k == 0:",
    "if not torch.isfinite(loss):",
    "try:",
    "def helper(model):",
    "def evaluate(model, loader):",
    "class Trainer(nn.Module):",
    "@torch.no_grad()\ndef step(model, x):",
    "if phase == 'val':",
    "for stats in history:",
]


@st.composite
def training_programs(draw: st.DrawFn) -> str:
    lines = [
        "import torch",
        "from torch import nn",
        "criterion = nn.CrossEntropyLoss()",
        "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)",
    ]
    depth = 0
    for _ in range(draw(st.integers(5, 40))):
        indent = "    " * depth
        if draw(st.booleans()) and depth < 8:
            block = draw(st.sampled_from(_BLOCKS))
            lines += [indent + part for part in block.split("\n")]
            lines.append("    " * (depth + 1) + draw(st.sampled_from(_STATEMENTS)))
            if block == "try:":
                lines.append(indent + "except Exception:")
                lines.append(indent + "    pass")
            else:
                depth += 1
        else:
            lines.append(indent + draw(st.sampled_from(_STATEMENTS)))
            if depth and draw(st.integers(0, 3)) == 0:
                depth -= 1
    source = "\n".join(lines) + "\n"
    try:
        compile(source, "fuzz.py", "exec", flags=0x400, dont_inherit=True)  # ast only
    except SyntaxError:
        return (
            "\n".join(
                line.replace("return loss", "pass")
                .replace("continue", "pass")
                .replace("break", "pass")
                for line in lines
            )
            + "\n"
        )
    return source


@settings(
    max_examples=120, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(training_programs())
def test_training_loop_shaped_programs(source: str) -> None:
    assert_lints_cleanly(source)
