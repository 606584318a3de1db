"""Which places of a function can run in the same pass, judged from the ``if`` s around them.

:func:`exclusive` says that two places sit on opposite sides of one test (the usual ``if
use_amp: ... else: ...`` split); :func:`conditional` that an assignment may not have run
where its name is used (it sits in a branch or loop body that does not also hold the use, or
in the other arm of an ``if`` than the use).
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Iterator

from torchdoctor.static.context import FileContext, Scope
from torchdoctor.static.structure import Frame, FrameKind, Item

__all__ = [
    "block_lines",
    "compared",
    "conditional",
    "conditions",
    "enclosing_blocks",
    "exclusive",
    "if_arms",
    "if_tests",
    "isinstance_failed",
    "on_opposite_arms",
    "spans",
    "statement_blocks",
]

_BRANCHES = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.Try, ast.Match)


def if_tests(frames: tuple[Frame, ...]) -> Iterator[tuple[ast.expr, bool]]:
    """The test of each ``if`` around a place, its leading ``not`` s taken off, with the
    truth value it needs there (``True`` in the body of ``if x:`` and in the ``else`` of
    ``if not x:``)."""
    for frame in frames:
        if frame.kind in (FrameKind.IF_BODY, FrameKind.IF_ELSE) and isinstance(frame.node, ast.If):
            test, truth = frame.node.test, frame.kind is FrameKind.IF_BODY
            while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
                test, truth = test.operand, not truth
            yield test, truth


def conditions(ctx: FileContext, frames: tuple[Frame, ...]) -> set[tuple[str, bool]]:
    """The ``if`` tests around a place, each with the truth value it needs there."""
    found = set()
    for test, truth in if_tests(frames):
        text = ctx.segment(test)
        if (
            isinstance(test, ast.Compare)
            and len(test.ops) == 1
            and isinstance(test.ops[0], (ast.IsNot, ast.NotEq))
        ):
            positive = "is" if isinstance(test.ops[0], ast.IsNot) else "=="
            text = f"{ctx.segment(test.left)} {positive} {ctx.segment(test.comparators[0])}"
            truth = not truth
        found.add((text, truth))
    return found


_NUMBER_TESTS: dict[type[ast.cmpop], Callable[[float, float], bool]] = {
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}


def compared(value: float, op: ast.cmpop, bound: float) -> bool | None:
    """What ``value <op> bound`` gives for a comparison of numbers; ``None`` for an
    operator that is none (``is``, ``in``)."""
    test = _NUMBER_TESTS.get(type(op))
    return None if test is None else test(value, bound)


def isinstance_failed(
    ctx: FileContext, frames: tuple[Frame, ...], expr: ast.expr, family: str, scope: Scope
) -> bool:
    """Whether the place sits where an ``isinstance(expr, C)`` test, ``C`` a class of
    ``family``, came out false: the ``else`` of ``if isinstance(model, nn.Module):`` (a
    helper that takes a module or a single parameter) or the body of ``if not
    isinstance(...)``."""
    text = ast.unparse(expr)
    for test, holds in if_tests(frames):
        if holds or not (
            isinstance(test, ast.Call)
            and isinstance(test.func, ast.Name)
            and test.func.id == "isinstance"
            and len(test.args) == 2
            and ast.unparse(test.args[0]) == text
        ):
            continue
        second = test.args[1]
        classes = second.elts if isinstance(second, ast.Tuple) else [second]
        for cls in classes:
            name = ctx.qualified_name(cls, scope)
            if name is not None and ctx.is_family(name, family):
                return True
    return False


def exclusive(ctx: FileContext, first: Item, second: Item) -> bool:
    """Whether two places can never run in the same pass (opposite sides of one test)."""
    mine = conditions(ctx, first.frames)
    if not mine:
        return False
    theirs = conditions(ctx, second.frames)
    return any((text, not truth) in theirs for text, truth in mine)


def conditional(ctx: FileContext, statement: ast.AST, use: ast.expr, scope: Scope) -> bool:
    """Whether ``statement`` sits in a branch or loop body that does not also hold ``use``."""
    root: ast.AST = scope.node if scope is not None else ctx.tree
    if not isinstance(statement, ast.stmt):
        return False
    stack: list[ast.AST] = [root]
    while stack:
        node = stack.pop()
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, ast.stmt) or not spans(child, statement):
                continue
            if child is statement:
                return False
            if isinstance(child, _BRANCHES) and not spans(child, use):
                return True
            if isinstance(child, ast.If) and _opposite_arms(child, statement, use):
                return True  # `if training: y = y.float()` / `else: loss(x, y)`
            stack.append(child)
    return False


def _opposite_arms(test: ast.If, statement: ast.stmt, use: ast.AST) -> bool:
    """Whether ``statement`` and ``use`` sit in different arms of one ``if``."""

    def arm(place: ast.AST) -> int | None:
        for index, body in enumerate((test.body, test.orelse)):
            if body and _spans_block(body, place):
                return index
        return None

    mine, theirs = arm(statement), arm(use)
    return mine is not None and theirs is not None and mine != theirs


def _spans_block(body: list[ast.stmt], place: ast.AST) -> bool:
    start = (getattr(place, "lineno", 0), getattr(place, "col_offset", 0))
    first, last = body[0], body[-1]
    return (
        (first.lineno, first.col_offset)
        <= start
        <= (last.end_lineno or 0, last.end_col_offset or 0)
    )


def spans(outer: ast.stmt, inner: ast.AST) -> bool:
    """Whether ``inner`` starts within ``outer``'s source span."""
    start = (getattr(inner, "lineno", 0), getattr(inner, "col_offset", 0))
    return (
        (outer.lineno, outer.col_offset)
        <= start
        <= (outer.end_lineno or 0, outer.end_col_offset or 0)
    )


def innermost_branch(frames: tuple[Frame, ...]) -> list[ast.stmt] | None:
    """The statements of the innermost ``if`` branch (body or ``else``) among ``frames``,
    or ``None`` when no ``if`` encloses the place."""
    branch = next(
        (f for f in reversed(frames) if f.kind in (FrameKind.IF_BODY, FrameKind.IF_ELSE)), None
    )
    if branch is None or not isinstance(branch.node, ast.If):
        return None
    return branch.node.body if branch.kind is FrameKind.IF_BODY else branch.node.orelse


def block_lines(block: list[ast.stmt]) -> range:
    """The source lines a block of statements spans (empty for an empty block)."""
    if not block:
        return range(0)
    return range(block[0].lineno, (block[-1].end_lineno or block[-1].lineno) + 1)


def if_arms(root: ast.AST) -> list[tuple[range, range]]:
    """The lines of the body and of the ``else`` of every ``if`` under ``root`` that has
    one, and the bodies of two ``if`` statements of one block whose tests compare the same
    value to different constants (``if args.optimizer == "adamw":`` ... ``if
    args.optimizer == "prodigy":``, the diffusers training scripts' optimizer choice),
    when the first body does not rebind that value."""
    arms = [
        (block_lines(node.body), block_lines(node.orelse))
        for node in ast.walk(root)
        if isinstance(node, ast.If) and node.orelse
    ]
    for node in ast.walk(root):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if not isinstance(block, list):
                continue
            tests = [(s, _equality(s.test)) for s in block if isinstance(s, ast.If)]
            for index, (first, one) in enumerate(tests):
                for second, other in tests[index + 1 :]:
                    if (
                        one is not None
                        and other is not None
                        and one[0] == other[0]
                        and one[1] != other[1]
                        and not _rebinds(first.body, one[0])
                    ):
                        arms.append((block_lines(first.body), block_lines(second.body)))
    return arms


def _equality(test: ast.expr) -> tuple[str, object] | None:
    """``(value text, constant)`` of a test ``value == constant``."""
    if (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.Eq)
        and isinstance(test.comparators[0], ast.Constant)
    ):
        return ast.unparse(test.left), test.comparators[0].value
    return None


def _rebinds(block: list[ast.stmt], text: str) -> bool:
    """Whether an assignment in ``block`` stores to the value compared (or its root)."""
    root = text.split("(")[0].rsplit(".", 1)[0] if "(" in text else text
    return any(
        isinstance(node, (ast.Name, ast.Attribute))
        and isinstance(node.ctx, ast.Store)
        and ast.unparse(node) in (text, root)
        for statement in block
        for node in ast.walk(statement)
    )


def on_opposite_arms(arms: list[tuple[range, range]], first: int, second: int) -> bool:
    """Whether lines ``first`` and ``second`` sit on the two sides of one ``if`` of
    ``arms`` (:func:`if_arms`): at most one of them runs."""
    return any(
        (first in body and second in other) or (first in other and second in body)
        for body, other in arms
    )


def is_main_guard(test: ast.expr) -> bool:
    """``test`` compares ``__name__`` with ``"__main__"`` (either way round, alone or
    within ``and``/``or``): the block runs when the file is the program, not on import."""
    for node in ast.walk(test):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides) and any(
                isinstance(s, ast.Constant) and s.value == "__main__" for s in sides
            ):
                return True
    return False


def statement_blocks(node: ast.AST) -> list[list[ast.stmt]]:
    """The statement lists directly under ``node`` (a function's or a loop's body, an
    ``if``'s arms, a ``try``'s parts and handlers, a ``match``'s cases)."""
    blocks = [
        getattr(node, name)
        for name in ("body", "orelse", "finalbody")
        if isinstance(getattr(node, name, None), list)
    ]
    blocks += [handler.body for handler in getattr(node, "handlers", [])]
    blocks += [case.body for case in getattr(node, "cases", [])]
    return [b for b in blocks if b and isinstance(b[0], ast.stmt)]


def enclosing_blocks(root: ast.AST, inner: ast.AST) -> Iterator[tuple[list[ast.stmt], int]]:
    """From ``root`` (a function's or a loop's node) down to ``inner``: each block on the
    way, with the index of its statement that holds ``inner``; not into a function or
    class defined on the way, whose code runs apart."""
    node = root
    while node is root or not isinstance(
        node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    ):
        found = next(
            (
                (block, index)
                for block in statement_blocks(node)
                for index, statement in enumerate(block)
                if spans(statement, inner)
            ),
            None,
        )
        if found is None:
            return
        yield found
        block, index = found
        node = block[index]
