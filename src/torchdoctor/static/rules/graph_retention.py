"""TD205 graph-retained-across-steps: a loss tensor kept beyond its iteration.

``total += loss`` or ``history.append(loss)`` in a training loop keeps each step's loss
with its whole autograd graph, so memory grows every step. Deferred to the end of each
loop, when the losses its ``backward()`` calls run on are known.
"""

from __future__ import annotations

import ast

from torchdoctor.findings import Applicability, Confidence, Depth, Fix
from torchdoctor.rules.detectors import detector
from torchdoctor.static.analysis.calls import last_name, root_name
from torchdoctor.static.analysis.loops import step_events
from torchdoctor.static.analysis.repeats import draws_batch
from torchdoctor.static.bindings import bound_names
from torchdoctor.static.grad_mode import grad_disabled_by
from torchdoctor.static.rules.base import LintRule
from torchdoctor.static.structure import Item, Loop
from torchdoctor.static.torchapi import name_tokens
from torchdoctor.static.training import EventKind, loop_events

_FEW = 16  # iterations of a fixed loop whose graphs may all be kept
# Words of a loop bound that counts the micro-batches of one optimizer step.
_ACCUMULATION_WORDS = frozenset({"accumulation", "accum", "accumulate", "accumulated"})


@detector("TD205", depth=Depth.LINT)
class GraphRetainedAcrossSteps(LintRule):
    """A loss tensor added to a total or list that outlives the iteration."""

    requires = ("backward",)

    def leave_loop(self, loop: Loop) -> None:
        ctx = self.ctx
        if self._few_iterations(loop):
            return  # `for i in range(2)`: a bounded number of graphs, kept on purpose
        events = loop_events(ctx, loop, forwards=False)
        losses = {
            e.target.id
            for e in events
            if e.kind is EventKind.BACKWARD and isinstance(e.target, ast.Name)
        }
        if not losses:
            return
        losses |= _components(loop, losses)
        assigned = _assigned_names(loop)
        for item in loop.items:
            if not loop.is_direct(item) or grad_disabled_by(ctx, item.frames) is not None:
                continue
            found = _accumulation(item.node, losses)
            if found is None:
                continue
            holder, loss = found
            if root_name(holder) in assigned:
                continue  # reset inside the loop: it lives for one iteration only
            if loss.id in _target_names(loop):
                continue  # `for aux in losses: total += aux`: the list holds them already
            if _reset_per_batch(loop, root_name(holder)):
                continue  # summed over one step's models or stages, reset every batch
            if self._made_anew_per_step(loop, root_name(holder)):
                continue  # one step's sub-batch losses, kept until that step is done
            if self._backpropagated_after(loop, root_name(holder)):
                continue  # MAML's task losses, stacked and backpropagated after the loop
            if self._kept_detached(item.node, holder, loop):
                continue  # a meter of the project whose add() reads `.data`/`.item()`
            if _rebound_detached(loop, item, loss.id):
                continue  # `loss = loss.item()` after backward(): a number is added
            self._report(loop, item, holder, loss)

    def _made_anew_per_step(self, loop: Loop, holder: str | None) -> bool:
        """Whether an enclosing loop rebinds the holder on every pass and runs the
        optimizer step, while the loops from ``loop`` up to it run none: the holder lives
        one training step (pytorch_image_classification's ``losses = []`` per batch,
        appended to per sub-batch, then one ``optimizer.step()``). A holder made anew per
        epoch around a loop that steps still keeps every step's graph."""
        inner, outer = loop, loop.parent
        while outer is not None and holder is not None:
            if self._steps_optimizer(inner):
                return False  # the steps happen below: the holder spans several of them
            if _rebound_every_pass(outer, holder):
                return self._steps_optimizer(outer)
            inner, outer = outer, outer.parent
        return False

    def _steps_optimizer(self, loop: Loop) -> bool:
        """Whether an optimizer step runs anywhere in the loop; remembered per loop."""
        key = ("td205-steps-optimizer", id(loop.node))
        if key not in self.ctx.memo:
            self.ctx.memo[key] = any(
                event.kind is EventKind.OPTIMIZER_STEP
                for event in step_events(self.ctx, loop.items, loop.function)
            )
        return bool(self.ctx.memo[key])

    def _backpropagated_after(self, loop: Loop, holder: str | None) -> bool:
        """Whether a ``backward()`` after the loop, in its function, runs on a value made
        from the holder (``torch.stack(losses).mean().backward()``): the graphs are kept
        because the step needs them, and they go when it is done."""
        function = loop.function
        end = getattr(loop.node, "end_lineno", None)
        if holder is None or function is None or end is None:
            return False
        ctx = self.ctx
        for event in step_events(ctx, function.items, function):
            if event.kind is not EventKind.BACKWARD or event.line <= end:
                continue
            target = event.target
            values: list[ast.AST] = [target] if target is not None else []
            if isinstance(target, ast.Name):
                found = ctx.lookup(target, function)
                if found is not None and found[0].value is not None:
                    values.append(found[0].value)
            if any(isinstance(n, ast.Name) and n.id == holder for v in values for n in ast.walk(v)):
                return True
        return False

    def _kept_detached(self, node: ast.AST, holder: ast.expr, loop: Loop) -> bool:
        """``meter.add(loss)`` where ``meter`` is an instance of a project class whose
        ``add`` reads the argument only through ``.data``/``.item()``/``.detach()``."""
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            return False
        type_name = self.ctx.instance_type(holder, loop.function)
        info = self.ctx.project_class_named(type_name) if type_name is not None else None
        return info is not None and info.keeps_detached(node.func.attr, len(node.args) - 1)

    def _few_iterations(self, loop: Loop) -> bool:
        """A ``for`` over ``range(k)`` with ``k`` a small constant (directly or through a
        name bound to one), or the number of micro-batches accumulated into one optimizer
        step (archai's ``range(gradient_accumulation_steps)``, a sum returned at the end of
        each step): memory cannot grow step after step."""
        node = loop.node
        if (
            not isinstance(node, ast.For)
            or not isinstance(node.iter, ast.Call)
            or not isinstance(node.iter.func, ast.Name)
            or node.iter.func.id != "range"
            or not node.iter.args
            or node.iter.keywords
        ):
            return False
        bound = node.iter.args[0] if len(node.iter.args) == 1 else node.iter.args[1]
        if _ACCUMULATION_WORDS & set(name_tokens(last_name(bound) or "")):
            return True  # `range(gradient_accumulation_steps)`: one optimizer step's batches
        bounds = [self._constant(arg, loop) for arg in node.iter.args]
        if any(b is None for b in bounds):
            return False
        start, stop = (0, bounds[0]) if len(bounds) == 1 else (bounds[0], bounds[1])
        return stop is not None and start is not None and stop - start <= _FEW

    def _constant(self, expr: ast.expr, loop: Loop) -> int | None:
        if isinstance(expr, ast.Name):
            found = self.ctx.lookup(expr, loop.function)
            expr = found[0].value if found is not None and found[0].value is not None else expr
        if (
            isinstance(expr, ast.Constant)
            and isinstance(expr.value, int)
            and not isinstance(expr.value, bool)
        ):
            return int(expr.value)
        return None

    def _report(self, loop: Loop, item: Item, holder: ast.expr, loss: ast.Name) -> None:
        ctx = self.ctx
        fix = Fix(
            f"Use `{loss.id}.item()`",
            (ctx.replace(loss, f"{loss.id}.item()"),),
            Applicability.UNSAFE,
        )
        self.report(
            item.node,
            f"`{ctx.segment(item.node)}` at line {item.line} keeps `{loss.id}` with its "
            f"autograd graph in `{ctx.segment(holder)}`, which outlives the iteration of the "
            f"loop at line {loop.line}: each step's graph stays referenced and memory grows "
            "every step",
            fix_hint=f"Accumulate a number: `{loss.id}.item()` (or `{loss.id}.detach()` to "
            "keep a tensor).",
            fix=fix,
            confidence=Confidence.HIGH,
        )


def _assigned_names(loop: Loop) -> set[str]:
    """Names (re)bound by a plain assignment in the loop, self-accumulations excepted."""
    names: set[str] = set()
    for item in loop.items:
        node = item.node
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else ([node.target] if isinstance(node, ast.AnnAssign) else [])
        )
        value = getattr(node, "value", None)
        used = {n.id for n in ast.walk(value) if isinstance(n, ast.Name)} if value else set()
        for target in targets:
            if isinstance(target, ast.Name) and target.id in used:
                continue  # total = total + x accumulates, it does not reset
            for sub in ast.walk(target):
                if isinstance(sub, ast.Name):
                    names.add(sub.id)
    return names


def _rebound_every_pass(loop: Loop, holder: str) -> bool:
    """Whether an assignment outside any ``if``/``try``/nested loop of ``loop`` binds the
    name ``holder`` to a value that does not read it (``losses = []``, ``total = 0.0``)."""
    for item in loop.items:
        node = item.node
        if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
            continue
        if not loop.is_unconditional(item):
            continue
        targets: list[ast.expr] = [*node.targets] if isinstance(node, ast.Assign) else [node.target]
        if holder in {n for t in targets for n in bound_names(t)} and not any(
            isinstance(n, ast.Name) and n.id == holder for n in ast.walk(node.value)
        ):
            return True
    return False


def _components(loop: Loop, losses: set[str]) -> set[str]:
    """Losses added into a loss that is backpropagated (``loss_trunc += loss`` before
    ``loss_trunc.backward()``): each carries the same graph."""
    found: set[str] = set()
    for item in loop.items:
        node = item.node
        if (
            isinstance(node, ast.AugAssign)
            and isinstance(node.op, ast.Add)
            and isinstance(node.target, ast.Name)
            and node.target.id in losses
            and isinstance(node.value, ast.Name)
            and node.value.id not in losses
        ):
            found.add(node.value.id)
    return found


def _accumulation(node: ast.AST, losses: set[str]) -> tuple[ast.expr, ast.Name] | None:
    """``(holder, loss)`` when ``node`` adds a graph-carrying loss to a longer-lived
    holder: ``total += loss``, ``total = total + loss``, ``history.append(loss)``."""
    if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add):
        loss = _carried_loss(node.value, losses)
        return (node.target, loss) if loss is not None else None
    if (
        isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and isinstance(node.value, ast.BinOp)
        and isinstance(node.value.op, ast.Add)
    ):
        target = node.targets[0]
        if (
            isinstance(target, ast.Name)
            and target.id not in losses
            and any(
                isinstance(side, ast.Name) and side.id == target.id
                for side in (node.value.left, node.value.right)
            )
        ):
            loss = _carried_loss(node.value, losses)
            return (target, loss) if loss is not None else None
        return None
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("append", "extend", "insert", "add")
        and node.args
    ):
        loss = _carried_loss(node.args[-1], losses)
        return (node.func.value, loss) if loss is not None else None
    return None


_DETACHING = frozenset({"item", "detach", "tolist", "numpy", "data", "detach_", "cpu_item"})
# Helpers that turn a tensor into a Python or NumPy value by their name (RAdam's
# `utils.to_scalar(loss)`, `to_np(x)`): what they return holds no graph.
_CONVERTERS = frozenset({"to_scalar", "to_numpy", "to_np", "tonumpy", "tensor2numpy", "to_float"})


def _carried_loss(expr: ast.expr, losses: set[str]) -> ast.Name | None:
    """A bare loss name inside ``expr`` that is not detached on the way."""
    stack: list[ast.AST] = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Name) and node.id in losses:
            return node
        if isinstance(node, ast.Attribute) and node.attr in _DETACHING:
            continue
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in _DETACHING:
                continue
            if (func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")) in (
                _CONVERTERS
            ):
                continue
            if isinstance(func, ast.Name) and func.id in (
                "float",
                "int",
                "str",
                "round",
                "len",
                "print",
                "bool",
            ):
                continue
            stack.extend(node.args)
            continue
        if isinstance(node, (ast.BinOp, ast.UnaryOp, ast.List, ast.Tuple, ast.Starred)):
            stack.extend(ast.iter_child_nodes(node))
    return None


def _target_names(loop: Loop) -> set[str]:
    """Names the ``for`` statement itself binds (none for ``while``)."""
    node = loop.node
    if not isinstance(node, (ast.For, ast.AsyncFor)):
        return set()
    return {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}


def _reset_per_batch(loop: Loop, holder: str | None) -> bool:
    """Whether an enclosing loop rebinds ``holder`` and draws a batch itself
    (``next(it)``, ``it.next()``, or a ``for`` over the batches while ``loop`` draws
    none): the inner loop then runs within one training step (over the discriminators,
    the linear heads, repeats of one batch), and the holder keeps one step's graphs at
    most, whatever the inner loop's length."""
    outer = loop.parent
    while outer is not None and holder is not None:
        if holder in _assigned_names(outer) and (
            draws_batch(outer) or (_iterates_batches(outer) and not _feeds_its_targets(loop))
        ):
            return True
        outer = outer.parent
    return False


def _iterates_batches(loop: Loop) -> bool:
    """A ``for`` over something other than a count (``range(...)``, also inside
    ``enumerate``/``tqdm``) whose targets the loop reads: the batches of a loader."""
    node = loop.node
    if not isinstance(node, (ast.For, ast.AsyncFor)):
        return False
    if any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "range"
        for n in ast.walk(node.iter)
    ):
        return False
    targets = _target_names(loop)
    return any(
        isinstance(n, ast.Name) and n.id in targets and isinstance(n.ctx, ast.Load)
        for statement in node.body
        for n in ast.walk(statement)
    )


def _feeds_its_targets(loop: Loop) -> bool:
    """Whether the loop draws data of its own: a ``next()`` call, or a target it binds
    passed to a call (``model(x)``, ``x.cuda()``); a loop over models and optimizers
    (``for head, opt in zip(heads, opts)``) only calls them."""
    if draws_batch(loop):
        return True
    targets = _target_names(loop)
    if not targets:
        return False
    node = loop.node
    for statement in getattr(node, "body", []):
        for call in ast.walk(statement):
            if not isinstance(call, ast.Call):
                continue
            if isinstance(call.func, ast.Name) and call.func.id in _FORMATTING:
                continue  # `int("%d%.3d" % (step, k))`: the index only names a seed or label
            for argument in [*call.args, *(k.value for k in call.keywords)]:
                if _data_names(argument) & targets:
                    return True
    return False


# Builtins that turn a value into a number or text: an index passed to them is no data.
_FORMATTING = frozenset({"int", "str", "float", "format", "repr", "print", "len", "round"})


def _data_names(expr: ast.expr) -> set[str]:
    """Names read in ``expr`` other than as a callee (``head`` in ``head(inp)``) or inside
    a conversion to a number or text (``int("%d" % k)``, a seed or a label)."""
    skipped = set()
    for n in ast.walk(expr):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
            skipped.add(id(n.func))
            if n.func.id in _FORMATTING:
                skipped.update(id(inner) for inner in ast.walk(n))
    return {n.id for n in ast.walk(expr) if isinstance(n, ast.Name) and id(n) not in skipped}


def _rebound_detached(loop: Loop, item: Item, name: str) -> bool:
    """Whether the last assignment of ``name`` before ``item`` in the loop's own body
    makes it a detached value (``loss = loss.detach().cpu().numpy()``, ``float(loss)``)."""
    latest: ast.expr | None = None
    for other in loop.items:
        node = other.node
        if other.line >= item.line or not loop.is_direct(other):
            continue
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id == name
        ):
            latest = node.value
    return latest is not None and _detached(latest)


def _detached(value: ast.expr) -> bool:
    """A value made by a detaching call at its outermost link: ``x.item()``,
    ``x.detach().cpu()``, ``x.cpu().numpy()``, ``float(x)``, ``to_np(x)``."""
    node: ast.expr = value
    while isinstance(node, (ast.Call, ast.Attribute, ast.Subscript)):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in _DETACHING or name in _CONVERTERS or name in ("float", "int"):
                return True
            if not isinstance(func, ast.Attribute):
                return False
            node = func.value
        elif isinstance(node, ast.Attribute):
            if node.attr in _DETACHING:
                return True
            node = node.value
        else:
            node = node.value
    return False
