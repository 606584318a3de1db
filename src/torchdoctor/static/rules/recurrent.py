"""TD109 rnn-output-read-batch-first: a sequence-first RNN's output read as batch-first.

``nn.LSTM``, ``nn.GRU`` and ``nn.RNN`` take and return ``(seq, batch, features)`` unless
built with ``batch_first=True``. Code that picks the last time step with ``out[:, -1]``
reads the batch-first layout: on a sequence-first output that is the last *sample* of the
batch at every time step, so the classifier sees the wrong rows (and, fed batch-first data,
the recurrence ran over the batch instead of over time). The index says what the author
believed the layout to be; the constructor says what it is.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from torchdoctor.findings import Depth, Finding
from torchdoctor.rules.detectors import detector
from torchdoctor.static.bindings import BindingKind
from torchdoctor.static.context import FileContext, Scope
from torchdoctor.static.rules.base import LintRule
from torchdoctor.static.structure import FunctionScope

_RECURRENT = frozenset({"torch.nn.LSTM", "torch.nn.GRU", "torch.nn.RNN"})


@detector("TD109", depth=Depth.LINT)
class RnnOutputReadBatchFirst(LintRule):
    """``out[:, -1]`` on the output of an RNN built without ``batch_first=True``."""

    requires = ("LSTM", "GRU", "RNN")
    needs_structure = True

    def __init__(self, ctx: FileContext, sink: Callable[[Finding], None]) -> None:
        super().__init__(ctx, sink)
        # `out[:, -1]` reads in functions, judged once the file is walked (the binding of
        # `out` may come from anywhere in its function).
        self._reads: list[tuple[ast.Subscript, ast.Name, FunctionScope]] = []

    def visit_Subscript(self, node: ast.Subscript) -> None:
        function = self.ctx.function
        value = node.value
        if function is not None and isinstance(value, ast.Name) and _last_step_of_batch_first(node):
            self._reads.append((node, value, function))

    def leave_module(self, module: object) -> None:
        for node, output, function in self._reads:
            layer = self._sequence_first_layer(output, function)
            if layer is not None:
                self._report(node, layer)

    def _sequence_first_layer(self, output: ast.Name, scope: Scope) -> ast.Call | None:
        """The ``nn.LSTM(...)`` call (without ``batch_first=True``) whose output the name
        holds: ``out, _ = self.lstm(x)`` or ``out = self.lstm(x)[0]``."""
        ctx = self.ctx
        binding = ctx.binding(output, scope)
        if binding is None or binding.kind not in (BindingKind.ASSIGN, BindingKind.UNPACKED):
            return None
        statement = binding.node
        if not isinstance(statement, ast.Assign) or len(statement.targets) != 1:
            return None
        target, value = statement.targets[0], statement.value
        if isinstance(target, ast.Tuple):
            first = target.elts[0] if target.elts else None
            if not (isinstance(first, ast.Name) and first.id == output.id):
                return None
        elif isinstance(value, ast.Subscript) and _is_index(value.slice, 0):
            value = value.value
        else:
            return None
        if not isinstance(value, ast.Call):
            return None
        built = self._constructor(value.func, scope)
        if built is None or _batch_first(built):
            return None
        return built

    def _constructor(self, layer: ast.expr, scope: Scope) -> ast.Call | None:
        """The recurrent-layer constructor call ``layer`` was bound to in this file."""
        ctx = self.ctx
        found = None
        if isinstance(layer, ast.Name):
            looked = ctx.lookup(layer, scope)
            found = looked[0] if looked is not None else None
        elif isinstance(layer, ast.Attribute):
            looked = ctx.attribute_binding(layer, scope)
            found = looked[0] if looked is not None else None
        value = found.value if found is not None else None
        if not isinstance(value, ast.Call):
            return None
        return value if ctx.qualified_name(value.func, scope) in _RECURRENT else None

    def _report(self, index: ast.Subscript, layer: ast.Call) -> None:
        ctx = self.ctx
        self.report(
            index,
            f"`{ctx.segment(index)}` at line {index.lineno} takes the last time step of a "
            f"batch-first output, but the `{ctx.segment(layer.func)}` built at line "
            f"{layer.lineno} has no `batch_first=True`: its output is (seq, batch, "
            "features), so this is the last sample of the batch at every time step, and "
            "batch-first inputs were run through time along the batch",
            fix_hint="Build the layer with `batch_first=True` (inputs and outputs become "
            "(batch, seq, features)), or index the sequence-first output as `out[-1]`.",
        )


def _last_step_of_batch_first(index: ast.Subscript) -> bool:
    """``x[:, -1]`` or ``x[:, -1, :]``: every row, the last column."""
    key = index.slice
    if not (isinstance(key, ast.Tuple) and len(key.elts) in (2, 3)):
        return False
    first, second = key.elts[0], key.elts[1]
    rest = key.elts[2:]
    return _full_slice(first) and _is_index(second, -1) and all(_full_slice(e) for e in rest)


def _full_slice(node: ast.expr) -> bool:
    return isinstance(node, ast.Slice) and node.lower is node.upper is node.step is None


def _is_index(node: ast.expr, value: int) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return _is_index(node.operand, -value) if value < 0 else False
    return (
        isinstance(node, ast.Constant) and node.value == value and not isinstance(node.value, bool)
    )


def _batch_first(call: ast.Call) -> bool:
    """``batch_first=`` given and not literally False (a flag passed in may be True)."""
    for keyword in call.keywords:
        if keyword.arg == "batch_first":
            return not (isinstance(keyword.value, ast.Constant) and keyword.value.value is False)
        if keyword.arg is None:
            return True  # **options: cannot tell
    return len(call.args) > 4  # positional batch_first (input, hidden, layers, bias, bf)
