"""Snapshot rules: TD912 state-dict-snapshot-aliased.

``model.state_dict()`` returns the module's own tensors (detached, but sharing storage),
not a copy. Kept as "the best weights so far" inside a training loop, it changes with
every later optimizer step, so what is read back after the loop (loaded, saved, returned)
is the last weights, not the best ones. The snapshot is judged where it is taken under a
condition (``if accuracy > best: best_state = model.state_dict()``) in a loop that trains,
and read outside that condition: after the loop, or in the loop's later passes. A snapshot
followed by leaving the loop (``break``, ``return``) is never trained past, and a copy
(``copy.deepcopy``, a comprehension of clones) is not a reference.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from torchdoctor.findings import Confidence, Depth
from torchdoctor.rules.detectors import detector
from torchdoctor.static import torchapi
from torchdoctor.static.analysis.loops import enclosing_loops, local_frames, trains
from torchdoctor.static.context import Scope
from torchdoctor.static.rules.base import LintRule
from torchdoctor.static.structure import FrameKind, Item, Loop, ModuleScope

_SHALLOW_COPIES = frozenset({"dict", "OrderedDict", "copy"})
_EXITS = (ast.Break, ast.Return, ast.Raise)


@detector("TD912", depth=Depth.LINT)
class StateDictSnapshotAliased(LintRule):
    """``best = model.state_dict()`` kept across later training steps."""

    requires = ("state_dict",)
    needs_structure = True

    def leave_module(self, module: ModuleScope) -> None:
        ctx = self.ctx
        scopes: list[tuple[Scope, list[Item]]] = [(None, module.items)]
        scopes += [(function, function.items) for function in module.functions]
        for scope, items in scopes:
            for item in items:
                node = item.node
                if not isinstance(node, ast.Assign) or len(node.targets) != 1:
                    continue
                model = _live_state_of(node.value)
                if model is None:
                    continue
                found = ctx.family_of(model, scope)
                if found is None or found[0] != torchapi.MODULE:
                    continue
                self._check(item, node, model, scope, found[1])

    def _check(
        self, item: Item, assign: ast.Assign, model: ast.expr, scope: Scope, confidence: Confidence
    ) -> None:
        ctx = self.ctx
        condition = _innermost_condition(item)
        if condition is None or _leaves_after(condition, assign):
            return
        loop = next((lp for lp in enclosing_loops(ctx, item.frames) if trains(ctx, lp)), None)
        if loop is None:
            return
        target = assign.targets[0]
        read = _read_outside(_search_root(target, scope, loop), target, condition, loop)
        if read is None:
            return
        text, model_text = ctx.segment(target), ctx.segment(model)
        where = (
            f"after the loop at line {loop.line}"
            if read.lineno > (loop.node.end_lineno or 0)
            else f"on later passes of the loop at line {loop.line}"
        )
        self.report(
            assign,
            f"`{text} = {ctx.segment(assign.value)}` at line {assign.lineno} keeps references "
            f"to `{model_text}`'s live tensors, not a copy: every later optimizer step "
            f"updates them in place, so `{ctx.segment(read)}` read at line {read.lineno} "
            f"({where}) holds the latest weights, not the ones this snapshot was taken for",
            fix_hint=f"Copy the tensors: `{text} = copy.deepcopy({model_text}.state_dict())` "
            f"(or `{{k: v.detach().clone() for k, v in {model_text}.state_dict().items()}}`).",
            confidence=confidence,
            evidence={"read_line": read.lineno, "loop_line": loop.line},
        )


def _live_state_of(value: ast.expr) -> ast.expr | None:
    """The module whose ``state_dict()`` ``value`` is, directly or through a shallow copy
    (``dict(...)``, ``OrderedDict(...)``, ``.copy()``, ``copy.copy(...)``), which copies
    the dict but shares the tensors."""
    if isinstance(value, ast.Call):
        func = value.func
        if isinstance(func, ast.Attribute) and func.attr == "state_dict":
            return func.value
        if isinstance(func, ast.Attribute) and func.attr == "copy" and not value.args:
            return _live_state_of(func.value)
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name in _SHALLOW_COPIES and len(value.args) == 1:
            return _live_state_of(value.args[0])
    return None


def _innermost_condition(item: Item) -> ast.If | None:
    """The ``if`` the assignment sits in, inside its loop (``None`` when it runs on every
    pass: the last pass's snapshot is the final state anyway)."""
    frames = local_frames(item.frames)
    for frame in reversed(frames):
        if frame.kind is FrameKind.LOOP:
            return None
        if frame.kind in (FrameKind.IF_BODY, FrameKind.IF_ELSE) and isinstance(frame.node, ast.If):
            return frame.node
    return None


def _leaves_after(condition: ast.If, assign: ast.Assign) -> bool:
    """The branch leaves the loop right after the snapshot (early stopping): it is never
    trained past."""
    branch = condition.body if assign in condition.body else condition.orelse
    return any(isinstance(s, _EXITS) and s.lineno > assign.lineno for s in branch)


def _search_root(target: ast.expr, scope: Scope, loop: Loop) -> ast.AST:
    """Where reads of the snapshot can be: the class for ``self.best``, else the function."""
    if isinstance(target, ast.Attribute) and scope is not None and scope.owner is not None:
        return scope.owner.node
    return scope.node if scope is not None else loop.node


def _read_outside(
    root: ast.AST, target: ast.expr, condition: ast.If, loop: Loop
) -> ast.expr | None:
    """The first place the snapshot's tensors are used (a call's argument, a returned
    value, an entry of either) outside the ``if`` that takes it: after the loop, in the
    loop's other statements, or in another method for an attribute."""
    holder = target.value if isinstance(target, ast.Subscript) else target
    inside = (condition.lineno, condition.end_lineno or condition.lineno)
    loop_start = loop.node.lineno
    for used in _used_values(root):
        if not _same(used, holder):
            continue
        line = used.lineno
        if inside[0] <= line <= inside[1]:
            continue
        if line < loop_start and not isinstance(holder, ast.Attribute):
            continue
        return used
    return None


def _used_values(root: ast.AST) -> Iterator[ast.expr]:
    """Expressions whose value is consumed: call arguments and returned values, with the
    values of dict, list and tuple displays among them."""
    for node in ast.walk(root):
        if isinstance(node, ast.Call):
            values: list[ast.expr] = [*node.args, *(k.value for k in node.keywords)]
        elif isinstance(node, ast.Return) and node.value is not None:
            values = [node.value]
        else:
            continue
        while values:
            value = values.pop()
            if isinstance(value, ast.Dict):
                values.extend(v for v in value.values if v is not None)
            elif isinstance(value, (ast.List, ast.Tuple)):
                values.extend(value.elts)
            else:
                yield value


def _same(expr: ast.expr, holder: ast.expr) -> bool:
    if isinstance(holder, ast.Name):
        return isinstance(expr, ast.Name) and expr.id == holder.id
    if isinstance(holder, ast.Attribute):
        return (
            isinstance(expr, ast.Attribute)
            and expr.attr == holder.attr
            and ast.dump(expr.value) == ast.dump(holder.value)
        )
    return False
