"""An in-place update that reads a view of the tensor it writes: TD227 inplace-reads-own-view.

``x -= x[:, :1]`` means "subtract each row's first value from the whole row", but the
first column is a view of ``x``: torch overwrites it (with 0) while the rest of the row is
still to be done, and the later elements subtract the new value. On torch 2.13 the row
``[3, 4, 5]`` becomes ``[0, 4, 5]``, not ``[0, 1, 2]``; in general the result depends on
the order torch visits the elements, which it does not promise. NumPy detects the overlap
and buffers; torch does not for these broadcasts. Writing ``x = x - x[:, :1]`` or reading
``x[:, :1].clone()`` gives the intended result.

The rule needs the whole tensor written (``x op= ...`` or ``x[:] op= ...``, ``x[:, :, :]``),
a basic-indexing view of it read directly in the value (not through a call that makes a
new tensor), and ``x`` shown to be a torch tensor (built by torch, or a model's output).
"""

from __future__ import annotations

import ast

from torchdoctor.findings import Depth
from torchdoctor.rules.detectors import detector
from torchdoctor.static import torchapi
from torchdoctor.static.bindings import BindingKind
from torchdoctor.static.rules.base import LintRule

_ARITHMETIC = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Pow, ast.Mod)
# Conversions that hand on the same tensor (or a tensor of the same values).
_SAME_VALUES = frozenset({"cpu", "cuda", "to", "detach", "float", "double", "half", "contiguous"})
_TENSOR_ONLY = frozenset({"cpu", "cuda", "detach"})


@detector("TD227", depth=Depth.LINT)
class InplaceReadsOwnView(LintRule):
    """``x -= x[:, :1]``: an in-place update whose operand is a view of ``x`` itself."""

    requires = ("+=", "-=", "*=", "/=")

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if not isinstance(node.op, _ARITHMETIC):
            return
        written = _whole(node.target)
        if written is None:
            return
        text = ast.unparse(written)
        view = next((v for v in _operands(node.value) if _view_of(v, text)), None)
        if view is None or not self._tensor(written):
            return
        ctx = self.ctx
        self.report(
            node,
            f"`{ctx.segment(node)}` at line {node.lineno} updates `{text}` in place while "
            f"reading `{ctx.segment(view)}`, a view of the same memory: torch overwrites "
            "elements of the view while later elements still read them, so they use the "
            "new values (for `x -= x[:, :1]`, only the first column changes)",
            fix_hint=f"Compute out of place (`{text} = {text} {_symbol(node.op)} "
            f"{ctx.segment(view)}`), or read a copy: `{ctx.segment(view)}.clone()`.",
        )

    def _tensor(self, expr: ast.expr) -> bool:
        """``expr`` is shown to be a torch tensor: built by a torch function, or bound to
        a model's output (through ``.cpu()``, ``.to()``, ``.detach()``...)."""
        ctx = self.ctx
        scope = ctx.function
        if ctx.instance_type(expr, scope) in torchapi.TENSOR_RESULTS:
            return True
        if not isinstance(expr, ast.Name):
            return False
        found = ctx.lookup(expr, scope)
        if found is None or found[0].kind is not BindingKind.ASSIGN or found[0].value is None:
            return False
        value = found[0].value
        while (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Attribute)
            and value.func.attr in _SAME_VALUES
        ):
            if value.func.attr in _TENSOR_ONLY:
                return True  # NumPy arrays and lists have no `.cpu()` or `.detach()`
            value = value.func.value
        return isinstance(value, ast.Call) and ctx.is_in_family(
            value.func, torchapi.MODULE, found[1]
        )


def _whole(target: ast.expr) -> ast.expr | None:
    """The tensor a target writes whole: ``x``, ``self.x``, ``x[:]``, ``x[:, :, :]``,
    ``x[...]``; ``None`` for part of it."""
    if isinstance(target, (ast.Name, ast.Attribute)):
        return target
    if isinstance(target, ast.Subscript) and isinstance(target.value, (ast.Name, ast.Attribute)):
        index = target.slice
        parts = index.elts if isinstance(index, ast.Tuple) else [index]
        if all(_full(part) for part in parts):
            return target.value
    return None


def _full(part: ast.expr) -> bool:
    if isinstance(part, ast.Slice):
        return part.lower is None and part.upper is None and part.step is None
    return isinstance(part, ast.Constant) and part.value is Ellipsis


def _operands(value: ast.expr) -> list[ast.expr]:
    """The leaves of an arithmetic expression, not looking inside calls (a call makes a
    new tensor) or subscripts."""
    if isinstance(value, ast.BinOp):
        return [*_operands(value.left), *_operands(value.right)]
    if isinstance(value, ast.UnaryOp):
        return _operands(value.operand)
    return [value]


def _view_of(value: ast.expr, text: str) -> bool:
    """``value`` is ``x[...]`` with basic indexing (slices, integers, ``None``, ``...``):
    a view of ``x`` (``x[0]`` too). Indexing with a tensor or a list copies."""
    if not (isinstance(value, ast.Subscript) and ast.unparse(value.value) == text):
        return False
    index = value.slice
    parts = index.elts if isinstance(index, ast.Tuple) else [index]
    return all(
        isinstance(part, ast.Slice)
        or (isinstance(part, ast.Constant) and (part.value is None or part.value is Ellipsis))
        or (isinstance(part, ast.Constant) and type(part.value) is int)
        or (isinstance(part, ast.UnaryOp) and isinstance(part.operand, ast.Constant))
        for part in parts
    )


def _symbol(op: ast.operator) -> str:
    return {
        ast.Add: "+",
        ast.Sub: "-",
        ast.Mult: "*",
        ast.Div: "/",
        ast.FloorDiv: "//",
        ast.Pow: "**",
        ast.Mod: "%",
    }.get(type(op), "-")
