"""What a call to one of the file's helpers does to the objects it is handed.

TD610 judges a function's items in source order, but the optimizer is often built by a
helper (``optimizer = make_optimizer(model, lr)``) and the layers replaced by another
(``prune(model)``, ``model.reset_classifier(12)``, as timm models offer). These functions
read one level into such a helper and translate what it does to its parameters (or to
``self``, for a method) into the caller's names: ``model.head`` for ``self.head`` in
``model.reset_classifier(12)``.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator

from torchdoctor.static.analysis.callers import called_function
from torchdoctor.static.analysis.optimized import model_path, optimizer_roots
from torchdoctor.static.context import FileContext, Scope
from torchdoctor.static.names import is_none
from torchdoctor.static.structure import Frame, FrameKind, FunctionScope
from torchdoctor.static.training import module_itself

__all__ = ["helper_optimizer_roots", "helper_replacements", "module_kept"]

NewParameters = Callable[[ast.expr, Scope], "str | None"]


def helper_optimizer_roots(ctx: FileContext, call: ast.Call, scope: Scope) -> list[str]:
    """``["model"]`` for ``make_optimizer(model)`` when every ``return`` of the helper
    gives an optimizer of its parameter's ``parameters()``."""
    helper = called_function(ctx, call, scope)
    if helper is None:
        return []
    found: list[str] = []
    for item in helper.items:
        node = item.node
        if not isinstance(node, ast.Return) or node.value is None:
            continue
        value = node.value
        if isinstance(value, ast.Name):
            bound = ctx.lookup(value, helper)
            value = bound[0].value if bound is not None and bound[0].value is not None else value
        roots = optimizer_roots(ctx, value, helper)
        if not roots:
            return []
        for root in roots:
            mapped = _in_caller(ctx, helper, call, root)
            if mapped is None:
                return []
            found.append(mapped)
    return found


def helper_replacements(
    ctx: FileContext, call: ast.Call, scope: Scope, new_parameters: NewParameters
) -> Iterator[tuple[str, str, FunctionScope]]:
    """``(path in the caller, class of the new layer, helper)`` for each layer with
    parameters the called helper assigns onto an object it is handed."""
    helper = called_function(ctx, call, scope)
    if helper is None:
        return
    for item in helper.items:
        node = item.node
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            for part, value, where in _pairs(ctx, target, node.value, helper):
                if not isinstance(part, (ast.Attribute, ast.Subscript)):
                    continue
                if _only_when_missing(item.frames, part):
                    continue  # `if self.model is None: self.model = Net()`: it exists here
                path = model_path(ctx, part)
                if model_path(ctx, module_kept(ctx, value, where)) == path:
                    continue  # `self.model = torch.compile(self.model)`: the same module
                what = new_parameters(value, where)
                mapped = _in_caller(ctx, helper, call, path)
                if what is not None and mapped is not None:
                    yield mapped, what, helper


def _only_when_missing(frames: tuple[Frame, ...], part: ast.expr) -> bool:
    """The assignment runs only when what it assigns (or the object holding it) is
    missing: under ``if self.model is None:`` or ``if not self.model:``, or in the
    ``else`` of ``if self.model is not None:``. The caller has built its optimizer from
    that object's parameters, so the object exists there and the branch does not run."""
    text = ast.unparse(part)
    for frame in frames:
        if frame.kind not in (FrameKind.IF_BODY, FrameKind.IF_ELSE) or not isinstance(
            frame.node, ast.If
        ):
            continue
        test, missing = frame.node.test, frame.kind is FrameKind.IF_BODY
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            subject = test.operand
        elif (
            isinstance(test, ast.Compare)
            and len(test.ops) == 1
            and isinstance(test.ops[0], (ast.Is, ast.IsNot))
            and is_none(test.comparators[0])
        ):
            subject = test.left
            missing = missing is isinstance(test.ops[0], ast.Is)
        else:
            continue
        checked = ast.unparse(subject)
        if missing and (text == checked or text.startswith(checked + ".")):
            return True
    return False


def module_kept(ctx: FileContext, value: ast.expr, scope: Scope) -> ast.expr:
    """The module ``value`` is when it is one that exists, moved or compiled
    (``model.to(device)``, ``torch.compile(model)``, ``torch.compile(model).cuda()``):
    it keeps its own parameters. Anything else is returned as it is."""
    while True:
        itself = module_itself(value)
        if not (
            isinstance(itself, ast.Call)
            and itself.args
            and ctx.is_call_to(itself, "torch.compile", scope=scope)
        ):
            return itself
        value = itself.args[0]


def _pairs(
    ctx: FileContext, target: ast.expr, value: ast.expr, helper: FunctionScope
) -> Iterator[tuple[ast.expr, ast.expr, Scope]]:
    """Each assigned target with its value and the scope to read the value in, through
    tuples on both sides and a local function returning a tuple
    (``model.fc1, model.fc2 = shrink(...)``)."""
    if not isinstance(target, ast.Tuple):
        yield target, value, helper
        return
    where: Scope = helper
    if isinstance(value, ast.Call):
        returned = called_function(ctx, value, helper)
        returns = [] if returned is None else _returned_tuples(returned)
        if returned is not None and len(returns) == 1:
            value, where = returns[0], returned
    if isinstance(value, ast.Tuple) and len(value.elts) == len(target.elts):
        for element, item in zip(target.elts, value.elts, strict=True):
            yield element, item, where


def _returned_tuples(function: FunctionScope) -> list[ast.Tuple]:
    return [
        item.node.value
        for item in function.items
        if isinstance(item.node, ast.Return) and isinstance(item.node.value, ast.Tuple)
    ]


def _in_caller(ctx: FileContext, helper: FunctionScope, call: ast.Call, path: str) -> str | None:
    """``model.head`` for the helper's ``self.head`` or ``net.head`` (``net`` its
    parameter), in terms of what ``call`` passes; ``None`` for anything else."""
    head, dot, rest = path.partition(".")
    head = head.partition("[")[0]
    if head == helper.self_name and isinstance(call.func, ast.Attribute):
        passed: ast.expr | None = call.func.value
    else:
        passed = helper.argument_for(call, head) if head in helper.parameter_names else None
    if not isinstance(passed, (ast.Name, ast.Attribute)):
        return None
    return model_path(ctx, passed) + dot + rest
