"""Snapshot rules: TD912 state-dict-snapshot-aliased.

``model.state_dict()`` returns the module's own tensors (detached, but sharing storage),
not a copy. Kept as "the best weights so far" inside a training loop, it changes with
every later optimizer step, so what is read back after the loop (loaded, saved, returned)
is the last weights, not the best ones. The snapshot is judged where it is taken under a
condition (``if accuracy > best: best_state = model.state_dict()``) in a loop that trains,
and read outside that condition: after the loop, or in the loop's later passes. A snapshot
followed by leaving the loop (``break``, ``return``) is never trained past, and a copy
(``copy.deepcopy``, a comprehension of clones) is not a reference.

The snapshot is as often taken by a helper the loop calls on every pass (an
early-stopping object's ``__call__``, a trainer's ``validate()``) and kept on an
attribute (``self.best_state = model.state_dict()``) or in a container the caller passed:
it is judged there when the file shows the helper called from inside a loop that trains
(and that loop not left right after the call), the snapshot taken only now and then (under
a condition in the helper, or a call made under one), and the attribute read back outside
that condition: by the class's other methods, or through the object by the caller.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from torchdoctor.findings import Confidence, Depth
from torchdoctor.rules.detectors import detector
from torchdoctor.static import torchapi
from torchdoctor.static.analysis.callers import called_function
from torchdoctor.static.analysis.calls import last_name
from torchdoctor.static.analysis.loops import (
    enclosing_loops,
    guard_between,
    local_frames,
    loop_bound_names,
    trains,
)
from torchdoctor.static.analysis.training_calls import TrainingCall, training_call_sites
from torchdoctor.static.branches import enclosing_blocks, spans
from torchdoctor.static.context import FileContext, Scope
from torchdoctor.static.rules.base import LintRule
from torchdoctor.static.structure import FrameKind, FunctionScope, Item, Loop, ModuleScope

_SHALLOW_COPIES = frozenset({"dict", "OrderedDict", "copy"})
_EXITS = (ast.Break, ast.Return, ast.Raise)
_HELPER_DEPTH = 2  # helpers returning a helper's state_dict(), followed this deep


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
                model = _live_state_of(ctx, node.value, scope)
                if model is None or _gathered(item):
                    continue
                found = ctx.family_of(model, scope)
                if found is None or found[0] != torchapi.MODULE:
                    continue
                loop = next(
                    (lp for lp in enclosing_loops(ctx, item.frames) if trains(ctx, lp)), None
                )
                if loop is not None:
                    self._check(item, node, model, scope, found[1], loop)
                elif isinstance(scope, FunctionScope):
                    self._check_helper(item, node, model, scope, found[1])

    def _check(
        self,
        item: Item,
        assign: ast.Assign,
        model: ast.expr,
        scope: Scope,
        confidence: Confidence,
        loop: Loop,
    ) -> None:
        condition = _innermost_condition(item, assign.targets[0])
        if condition is None or _leaves_after(condition, assign) or _fresh_per_pass(model, loop):
            return
        target = assign.targets[0]
        # gsplat's `data = {...}` built anew in this pass: only reads past its block count
        region: ast.stmt = _fresh_region(target, assign, loop) or condition
        read = _read_outside(_search_root(target, scope, loop), target, region, loop)
        if read is None:
            return
        where = (
            f"after the loop at line {loop.line}"
            if read.lineno > (loop.node.end_lineno or 0)
            else f"on later passes of the loop at line {loop.line}"
        )
        self._report(assign, model, read, where, confidence, {"loop_line": loop.line})

    def _check_helper(
        self,
        item: Item,
        assign: ast.Assign,
        model: ast.expr,
        function: FunctionScope,
        confidence: Confidence,
    ) -> None:
        """A snapshot a helper keeps where it outlives the call (an attribute, a
        container the caller passed), the helper called from a loop that trains."""
        target = assign.targets[0]
        holder = target.value if isinstance(target, ast.Subscript) else target
        root = _kept_root(holder, function)
        if root is None or (holder is root and not isinstance(target, ast.Subscript)):
            return
        condition = _innermost_condition(item, target)
        if condition is not None and _stops_after(condition, assign):
            return
        for site in training_call_sites(self.ctx, function):
            if _left_after(site) or (condition is None and not _guarded_in_loop(site)):
                continue
            passed = (
                _caller_side(model, function, site.call) if isinstance(model, ast.Name) else None
            )
            if isinstance(passed, ast.Name) and _fresh_per_pass(passed, site.loop):
                continue
            found = _read_back(self.ctx, holder, root, function, assign, condition, site)
            if found is None:
                continue
            read, place = found
            line, call = site.loop.line, site.call
            through = f"`{self.ctx.segment(call)}` at line {call.lineno}"
            taken = f"the loop at line {line}, which takes the snapshot through {through}"
            where = {"after": f"after {taken}", "within": f"on later passes of {taken}"}.get(
                place,
                f"in `{place}()`; the loop at line {line} takes the snapshot through "
                f"{through} and trains on",
            )
            evidence = {"loop_line": line, "call_line": call.lineno}
            self._report(assign, model, read, where, confidence, evidence)
            return

    def _report(
        self,
        assign: ast.Assign,
        model: ast.expr,
        read: ast.expr,
        where: str,
        confidence: Confidence,
        evidence: dict[str, int],
    ) -> None:
        ctx = self.ctx
        text, model_text = ctx.segment(assign.targets[0]), ctx.segment(model)
        self.report(
            assign,
            f"`{text} = {ctx.segment(assign.value)}` at line {assign.lineno} keeps references "
            f"to `{model_text}`'s live tensors, not a copy: every later optimizer step "
            f"updates them in place, so `{ctx.segment(read)}` read at line {read.lineno} "
            f"({where}) holds the latest weights, not the ones this snapshot was taken for",
            fix_hint=f"Copy the tensors: `{text} = copy.deepcopy({model_text}.state_dict())` "
            f"(or `{{k: v.detach().clone() for k, v in {model_text}.state_dict().items()}}`).",
            confidence=confidence,
            evidence={"read_line": read.lineno, **evidence},
        )


def _gathered(item: Item) -> bool:
    """The ``state_dict()`` runs under ``with FSDP.state_dict_type(...)`` (a full state
    dict gathered from the shards, pyKT's ``offload_to_cpu=True``): new tensors, not the
    live parameters."""
    return any(
        frame.kind is FrameKind.WITH
        and isinstance(frame.node, (ast.With, ast.AsyncWith))
        and any(
            isinstance(w.context_expr, ast.Call)
            and last_name(w.context_expr.func) == "state_dict_type"
            for w in frame.node.items
        )
        for frame in item.frames
    )


def _live_state_of(
    ctx: FileContext, value: ast.expr, scope: Scope, depth: int = 0
) -> ast.expr | None:
    """The module whose ``state_dict()`` ``value`` is, directly or through a shallow copy
    (``dict(...)``, ``OrderedDict(...)``, ``.copy()``, ``copy.copy(...)``, a comprehension
    of the same tensors), which copies the dict but shares the tensors; or through a
    helper of the file that returns its parameter's ``state_dict()``."""
    if isinstance(value, ast.DictComp):
        return _shared_comprehension(value)
    if isinstance(value, ast.Call):
        func = value.func
        if isinstance(func, ast.Attribute) and func.attr == "state_dict":
            return func.value
        if isinstance(func, ast.Attribute) and func.attr == "copy" and not value.args:
            return _live_state_of(ctx, func.value, scope, depth)
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name in _SHALLOW_COPIES and len(value.args) == 1:
            return _live_state_of(ctx, value.args[0], scope, depth)
        return _returned_state(ctx, value, scope, depth) if depth < _HELPER_DEPTH else None
    return None


def _shared_comprehension(value: ast.DictComp) -> ast.expr | None:
    """``{k: v for k, v in model.state_dict().items()}`` (or ``v.detach()``, ``v.data``):
    a new dict of the same tensors."""
    if len(value.generators) != 1 or value.generators[0].ifs:
        return None
    generator = value.generators[0]
    pair, source = generator.target, generator.iter
    if not (
        isinstance(pair, ast.Tuple)
        and len(pair.elts) == 2
        and isinstance(pair.elts[1], ast.Name)
        and isinstance(source, ast.Call)
        and isinstance(source.func, ast.Attribute)
        and source.func.attr == "items"
        and not source.args
    ):
        return None
    tensor = value.value
    if isinstance(tensor, ast.Call) and isinstance(tensor.func, ast.Attribute):
        tensor = tensor.func.value if tensor.func.attr == "detach" and not tensor.args else tensor
    elif isinstance(tensor, ast.Attribute) and tensor.attr == "data":
        tensor = tensor.value
    if not (isinstance(tensor, ast.Name) and tensor.id == pair.elts[1].id):
        return None
    inner = source.func.value
    if (
        isinstance(inner, ast.Call)
        and isinstance(inner.func, ast.Attribute)
        and inner.func.attr == "state_dict"
    ):
        return inner.func.value
    return None


def _returned_state(ctx: FileContext, call: ast.Call, scope: Scope, depth: int) -> ast.expr | None:
    """The argument whose ``state_dict()`` a helper of the file returns: every ``return``
    of the helper gives its parameter's live state (``return model.state_dict()``)."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if name not in _state_returners(ctx):
        return None
    helper = called_function(ctx, call, scope)
    if helper is None:
        return None
    names: set[str] = set()
    for item in helper.items:
        node = item.node
        if not isinstance(node, ast.Return):
            continue
        model = None if node.value is None else _live_state_of(ctx, node.value, helper, depth + 1)
        if not isinstance(model, ast.Name):
            return None
        names.add(model.id)
    if len(names) != 1:
        return None
    param = names.pop()
    return helper.argument_for(call, param) if param in helper.parameter_names else None


def _state_returners(ctx: FileContext) -> frozenset[str]:
    """Names of the file's functions with a ``return`` that mentions ``state_dict``: the
    only helpers worth resolving a call to (once per file)."""
    key = ("snapshots", "state-returners")
    found = ctx.memo.get(key)
    if not isinstance(found, frozenset):
        names = {
            function.name
            for function in ctx.module.functions
            for item in function.items
            if isinstance(item.node, ast.Return)
            and item.node.value is not None
            and any(
                isinstance(n, ast.Attribute) and n.attr == "state_dict"
                for n in ast.walk(item.node.value)
            )
        }
        found = ctx.memo[key] = frozenset(names)
    return found


def _kept_root(holder: ast.expr, function: FunctionScope) -> ast.Name | None:
    """The name at the base of ``holder`` (``self`` of ``self.best``, ``store`` of
    ``store["best"]``) when it outlives a call: the instance or a parameter."""
    root = holder
    while isinstance(root, ast.Attribute):
        root = root.value
    if not isinstance(root, ast.Name):
        return None
    if root.id == function.self_name or root.id in function.parameter_names:
        return root
    return None


def _stops_after(condition: ast.If, assign: ast.Assign) -> bool:
    """The helper's branch raises, or returns something the caller may stop on, after
    the snapshot."""
    branch = _branch_of(condition, assign)
    for statement in branch:
        if statement.lineno <= assign.lineno:
            continue
        if isinstance(statement, ast.Raise):
            return True
        if isinstance(statement, ast.Return) and not (
            statement.value is None
            or (isinstance(statement.value, ast.Constant) and not statement.value.value)
        ):
            return True
    return False


def _fresh_per_pass(model: ast.expr, loop: Loop) -> bool:
    """The model is a name the loop binds anew (``model = Net()`` on every pass of a
    search): the steps of later passes train another model, not the one snapshotted."""
    return isinstance(model, ast.Name) and model.id in loop_bound_names(loop)


def _left_after(site: TrainingCall) -> bool:
    """The loop is left right after the call (``es(model); break``)."""
    block = site.item.frames[-1]
    return any(
        isinstance(item.node, _EXITS) and item.frames[-1] is block and item.line > site.call.lineno
        for item in site.loop.items
    )


def _guarded_in_loop(site: TrainingCall) -> bool:
    """The call is made under an ``if`` inside the loop (only now and then)."""
    return guard_between(site.item.frames, site.loop.frame, lambda _node, _body: True) is not None


def _read_back(
    ctx: FileContext,
    holder: ast.expr,
    root: ast.Name,
    function: FunctionScope,
    assign: ast.Assign,
    condition: ast.If | None,
    site: TrainingCall,
) -> tuple[ast.expr, str] | None:
    """Where a helper's kept snapshot is used again, and where that is: ``"after"``
    (the caller's loop), ``"within"`` (its later passes) or the name of the method."""
    loop = site.loop
    loop_end = loop.node.end_lineno or loop.line
    stand_in = _caller_side(root, function, site.call)
    if stand_in is not None:
        caller = site.scope.node if site.scope is not None else ctx.tree
        for used in _used_values(caller):
            if used.lineno >= loop.line and _same_through(used, holder, stand_in):
                return used, "after" if used.lineno > loop_end else "within"
    if root.id != function.self_name or function.owner is None:
        return None
    if condition is not None:
        skip = (condition.lineno, condition.end_lineno or condition.lineno)
    else:  # the call is guarded: what runs after the snapshot in the same call is at once
        skip = (assign.lineno, function.node.end_lineno or assign.lineno)
    at_once = _called_at_once(function, root, skip, assign)
    for method in function.owner.methods.values():
        if method.name in at_once:
            continue
        for used in _used_values(method.node):
            if skip[0] <= used.lineno <= skip[1] or not _same(used, holder):
                continue
            if method is site.scope:
                if used.lineno < loop.line:
                    continue
                return used, "after" if used.lineno > loop_end else "within"
            return used, method.name
    return None


def _called_at_once(
    function: FunctionScope, root: ast.Name, span: tuple[int, int], assign: ast.Assign
) -> set[str]:
    """Methods the helper calls on itself right after the snapshot (``self.save()``): what
    they read of it, they read before any later step."""
    return {
        node.func.attr
        for node in ast.walk(function.node)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == root.id
        and assign.lineno < node.lineno <= span[1]
    }


def _caller_side(root: ast.Name, function: FunctionScope, call: ast.Call) -> ast.expr | None:
    """What ``root`` is in the caller: the object a method is called on, or the argument
    passed for a parameter."""
    if root.id == function.self_name:
        func = call.func
        if function.name == "__call__" and not (
            isinstance(func, ast.Attribute) and func.attr == "__call__"
        ):
            return func
        return func.value if isinstance(func, ast.Attribute) else None
    return function.argument_for(call, root.id)


def _same_through(expr: ast.expr, holder: ast.expr, stand_in: ast.expr) -> bool:
    """``expr`` is ``holder`` with its root name replaced by ``stand_in``."""
    if isinstance(holder, ast.Name):
        return ast.dump(expr) == ast.dump(stand_in)
    if isinstance(holder, ast.Attribute):
        return (
            isinstance(expr, ast.Attribute)
            and expr.attr == holder.attr
            and _same_through(expr.value, holder.value, stand_in)
        )
    return False


def _innermost_condition(item: Item, target: ast.expr) -> ast.If | None:
    """The ``if`` the assignment sits in, inside its loop (``None`` when it runs on every
    pass: the last pass's snapshot is the final state anyway). An ``if`` whose every
    branch binds the same target (SAM-Med3D's ``if multi_gpu: state =
    model.module.state_dict() else: state = model.state_dict()``) picks how the snapshot
    is taken, not whether: the condition is the one around it."""
    frames = local_frames(item.frames)
    for frame in reversed(frames):
        if frame.kind is FrameKind.LOOP:
            return None
        if (
            frame.kind in (FrameKind.IF_BODY, FrameKind.IF_ELSE)
            and isinstance(frame.node, ast.If)
            and not _bound_on_every_branch(frame.node, ast.dump(target))
        ):
            return frame.node
    return None


def _branch_of(condition: ast.If, node: ast.stmt) -> list[ast.stmt]:
    """The block of ``condition`` that holds ``node``, however deep."""
    body_end = condition.body[-1].end_lineno or condition.body[-1].lineno
    return condition.body if node.lineno <= body_end else condition.orelse


def _bound_on_every_branch(condition: ast.If, target: str) -> bool:
    """Each branch of ``condition`` (``elif`` chains included, an ``else`` required)
    assigns ``target`` (an ``ast.dump``) in its own block."""

    def binds(block: list[ast.stmt]) -> bool:
        if len(block) == 1 and isinstance(block[0], ast.If):
            return _bound_on_every_branch(block[0], target)
        return any(
            isinstance(s, ast.Assign) and len(s.targets) == 1 and ast.dump(s.targets[0]) == target
            for s in block
        )

    return bool(condition.orelse) and binds(condition.body) and binds(condition.orelse)


def _leaves_after(condition: ast.If, assign: ast.Assign) -> bool:
    """The branch leaves the loop right after the snapshot (early stopping): it is never
    trained past."""
    branch = _branch_of(condition, assign)
    return any(isinstance(s, _EXITS) and s.lineno > assign.lineno for s in branch)


def _fresh_region(target: ast.expr, assign: ast.Assign, loop: Loop) -> ast.stmt | None:
    """For an entry ``data["m"] = model.state_dict()`` of a dict the loop builds anew
    before it in the same pass (``data = {...}``), the block holding that fresh dict: the
    innermost ``if`` around both, else the loop itself. Later passes build another dict,
    so a read inside the block reads this pass's entries, not a stale snapshot."""
    if not isinstance(target, ast.Subscript) or not isinstance(target.value, ast.Name):
        return None
    name = target.value.id
    fresh = [
        node
        for node in ast.walk(loop.node)
        if isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Name)
        and node.targets[0].id == name
        and node.lineno < assign.lineno
        and _new_container(node.value)
    ]
    if not fresh:
        return None
    start, end = fresh[-1].lineno, assign.end_lineno or assign.lineno
    around = [
        node
        for node in ast.walk(loop.node)
        if isinstance(node, ast.If)
        and node.body
        and node.body[0].lineno <= start
        and end <= (node.body[-1].end_lineno or node.body[-1].lineno)
    ]
    return max(around, key=lambda node: node.lineno) if around else loop.node


def _new_container(value: ast.expr) -> bool:
    """``{...}``, ``{k: v for ...}``, ``dict(...)``, ``OrderedDict()``: a new dict."""
    if isinstance(value, (ast.Dict, ast.DictComp)):
        return True
    return isinstance(value, ast.Call) and last_name(value.func) in ("dict", "OrderedDict")


def _search_root(target: ast.expr, scope: Scope, loop: Loop) -> ast.AST:
    """Where reads of the snapshot can be: the class for ``self.best``, else the function."""
    if isinstance(target, ast.Attribute) and scope is not None and scope.owner is not None:
        return scope.owner.node
    return scope.node if scope is not None else loop.node


def _read_outside(
    root: ast.AST, target: ast.expr, condition: ast.stmt, loop: Loop
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
        if isinstance(holder, ast.Name) and _rebound_before(root, holder.id, used, condition, loop):
            continue  # offsite-tuning: `state_dict = adapter.state_dict()` just before
        return used
    return None


def _rebound_before(
    root: ast.AST, name: str, used: ast.expr, condition: ast.stmt, loop: Loop
) -> bool:
    """An earlier statement of a block around ``used`` binds ``name`` anew after the
    snapshot was taken, or in the loop's pass that reads it (offsite-tuning's
    `state_dict = net.adapter.state_dict()` right before saving it): the read sees that
    value, not the snapshot. A binding before the loop precedes the snapshot too."""
    return any(
        isinstance(statement, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == name for t in statement.targets)
        and (spans(loop.node, statement) or statement.lineno > (condition.end_lineno or 0))
        for block, index in enclosing_blocks(root, used)
        for statement in block[:index]
    )


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
