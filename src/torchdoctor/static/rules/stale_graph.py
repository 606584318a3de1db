"""A loss back-propagated through a model its optimizer already stepped: TD228
backward-through-stepped-model.

An optimizer's ``step()`` updates its parameters in place. A loss computed through that
model before the step (the generator's loss through the discriminator, the actor's loss
through the critic) and back-propagated after it goes through a graph whose saved
weights have changed: PyTorch raises "one of the variables needed for gradient
computation has been modified by an inplace operation" (before 1.5 it silently computed
gradients from the old weights). The loss has to be computed again after the step.

Read in each loop's own statements: the loss's last assignment, another loss's backward
and an optimizer step after it, then ``loss.backward()``, where the loss's computation
(through the names it is made from, in the same pass) calls a model that optimizer was
built on. A value taken through ``.detach()``, ``.item()`` or ``.data`` is no graph. A
step with no backward before it in the pass is TD204's (step before backward).
"""

from __future__ import annotations

import ast

from torchdoctor.findings import Depth
from torchdoctor.rules.detectors import detector
from torchdoctor.static import torchapi
from torchdoctor.static.analysis.calls import assigned_names
from torchdoctor.static.analysis.optimized import covers, model_path, optimizer_roots
from torchdoctor.static.context import Scope
from torchdoctor.static.frameworks import framework_owned
from torchdoctor.static.rules.base import LintRule
from torchdoctor.static.structure import Item, Loop

# Methods and attributes whose result carries no graph.
_GRAPHLESS = frozenset({"detach", "item", "tolist", "numpy", "cpu_numpy"})
# How far back through the names a loss is made from (loss <- probs <- logits <- ...).
_DEPTH = 6


@detector("TD228", depth=Depth.LINT)
class BackwardThroughSteppedModel(LintRule):
    """``g_loss = f(D(fake))``, ``opt_d.step()``, then ``g_loss.backward()``."""

    requires = ("backward",)
    needs_structure = True

    def leave_loop(self, loop: Loop) -> None:
        ctx = self.ctx
        if framework_owned(ctx, loop.function):
            return
        items = [item for item in loop.items if loop.is_direct(item)]
        for index, item in enumerate(items):
            loss = _backward_of(item.node)
            if loss is None:
                continue
            made = _last_assignment(items, index, loss)
            if made is None:
                continue
            for position in range(made + 1, index):
                step = items[position]
                if not any(_backward_of(i.node) for i in items[made + 1 : position]):
                    continue  # no other loss stepped here: a step before backward (TD204)
                roots = self._stepped_models(step, loop.function)
                if not roots:
                    continue
                called = self._models_called(items, made, loss)
                hit = next((m for m in called for r in roots if covers(r, m)), None)
                if hit is not None:
                    self._report(item, items[made], step, loss, hit)
                    return

    def _stepped_models(self, item: Item, scope: Scope) -> list[str]:
        """The models whose parameters ``item`` (an ``optimizer.step()``) updates."""
        call = item.node
        if not (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and call.func.attr == "step"
            and not call.args
        ):
            return []
        optimizer = call.func.value
        if not self.ctx.is_in_family(optimizer, torchapi.OPTIMIZER, scope):
            return []
        value = self._bound_value(optimizer, scope)
        return optimizer_roots(self.ctx, value, scope) if value is not None else []

    def _bound_value(self, expr: ast.expr, scope: Scope) -> ast.expr | None:
        ctx = self.ctx
        if isinstance(expr, ast.Name):
            binding = ctx.binding(expr, scope)
            return binding.value if binding is not None else None
        if isinstance(expr, ast.Attribute):
            found = ctx.attribute_binding(expr, scope)
            return found[0].value if found is not None else None
        return None

    def _models_called(self, items: list[Item], made: int, loss: str) -> list[str]:
        """The callees (``D``, ``self.critic``) of the graph ``loss`` is built from: the
        calls in its assignment and, through the names they read, in the assignments of
        the same pass before it."""
        wanted = {loss}
        seen: set[str] = set()
        called: list[str] = []
        end = made + 1
        for _ in range(_DEPTH):
            found: set[str] = set()
            for item in reversed(items[:end]):
                node = item.node
                if not isinstance(node, ast.Assign):
                    continue
                hits = (assigned_names(node) & wanted) - seen
                if not hits:
                    continue
                seen |= hits
                names, calls = _graph_reads(node.value)
                called += [model_path(self.ctx, c.func) for c in calls]
                found |= names
            wanted = found - seen
            if not wanted:
                break
        return called

    def _report(self, backward: Item, made: Item, step: Item, loss: str, model: str) -> None:
        ctx = self.ctx
        stepped = ctx.segment(step.node)
        self.report(
            backward.node,
            f"`{loss}` (line {made.line}) is computed through `{model}`, then `{stepped}` "
            f"(line {step.line}) updates `{model}`'s parameters in place, and only then "
            f"`{ctx.segment(backward.node)}` (line {backward.line}) back-propagates through "
            'the graph built with the old weights: PyTorch raises "one of the variables '
            'needed for gradient computation has been modified by an inplace operation" '
            "(older versions silently used the stale weights)",
            fix_hint=f"Compute `{loss}` again after `{stepped}` (run `{model}` forward on the "
            "same inputs once more), or call its `backward()` before that step.",
            evidence={"step_line": step.line, "loss_line": made.line},
        )


def _backward_of(node: ast.AST) -> str | None:
    """``loss`` for ``loss.backward(...)``."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "backward"
        and isinstance(node.func.value, ast.Name)
    ):
        return node.func.value.id
    return None


def _last_assignment(items: list[Item], before: int, name: str) -> int | None:
    """The index of ``name``'s last plain assignment before ``before``; ``None`` when an
    augmented or annotated one comes last, or none does."""
    for index in range(before - 1, -1, -1):
        node = items[index].node
        if name in assigned_names(node):
            return index if isinstance(node, ast.Assign) else None
    return None


def _graph_reads(value: ast.expr) -> tuple[set[str], list[ast.Call]]:
    """The names and the calls an expression's graph is built from, leaving out what is
    taken through ``.detach()``, ``.item()`` or ``.data`` (no graph there)."""
    names: set[str] = set()
    calls: list[ast.Call] = []
    stack: list[ast.AST] = [value]
    while stack:
        node = stack.pop()
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _GRAPHLESS
        ):
            continue
        if isinstance(node, ast.Attribute) and node.attr == "data":
            continue
        if isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)):
            calls.append(node)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            names.add(node.id)
        stack.extend(ast.iter_child_nodes(node))
    return names, calls
