"""A loss made to require grad by hand: TD209 loss-does-not-require-grad (lint's half).

``loss.requires_grad = True`` (or ``loss.requires_grad_()``) before ``loss.backward()``
is the usual silencing of "element 0 of tensors does not require grad and does not have a
grad_fn". A loss computed from trainable parameters already requires grad (and setting
the flag on it raises, as it is no leaf); the line runs only because the loss was cut from
the graph (every parameter it depends on frozen, a ``no_grad`` block, ``.detach()``,
``.item()``, a new tensor). The backward then starts and ends at the loss itself: no
parameter gets a gradient and the optimizer never moves the model. The tensor the flag is
set on must be the one ``backward()`` is called on, with no new value bound in between.
"""

from __future__ import annotations

import ast

from torchdoctor.findings import Depth
from torchdoctor.rules.detectors import detector
from torchdoctor.static.rules.base import LintRule
from torchdoctor.static.structure import Item, ModuleScope


@detector("TD209", depth=Depth.LINT)
class LossMadeToRequireGrad(LintRule):
    """``loss.requires_grad = True`` followed by ``loss.backward()``."""

    requires = ("requires_grad",)
    needs_structure = True

    def leave_module(self, module: ModuleScope) -> None:
        bodies: list[list[Item]] = [module.items]
        bodies += [function.items for function in module.functions]
        for items in bodies:
            for index, item in enumerate(items):
                name = _flag_set_on(item.node)
                if name is None:
                    continue
                backward = _backward_of(items[index + 1 :], name)
                if backward is not None:
                    self._report(item.node, name, backward)

    def _report(self, flag: ast.AST, name: str, backward: ast.Call) -> None:
        line = getattr(flag, "lineno", 0)
        self.report(
            flag,
            f"`{self.ctx.segment(flag)}` at line {line} makes `{name}` require grad "
            f"by hand before `backward()` at line {backward.lineno}: a loss computed from "
            "trainable parameters requires grad already, so this line only runs because "
            f"`{name}` was cut from the graph (frozen parameters, no_grad, .detach(), "
            ".item(), a new tensor); the backward then reaches no parameter and the "
            "optimizer never changes the model",
            fix_hint=f"Remove the line and find where `{name}` loses its graph: a "
            "parameter it depends on must require grad, and the loss must be computed "
            "from tensors (not .item() or numpy) outside no_grad.",
        )


def _flag_set_on(node: ast.AST) -> str | None:
    """``x.requires_grad = True`` / ``x.requires_grad_()`` / ``x.requires_grad_(True)``:
    the name ``x``."""
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        target = node.targets[0]
        if (
            isinstance(target, ast.Attribute)
            and target.attr == "requires_grad"
            and isinstance(target.value, ast.Name)
            and isinstance(node.value, ast.Constant)
            and node.value.value is True
        ):
            return target.value.id
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "requires_grad_"
        and isinstance(node.func.value, ast.Name)
        and (not node.args or isinstance(node.args[0], ast.Constant) and node.args[0].value is True)
    ):
        return node.func.value.id
    return None


def _backward_of(items: list[Item], name: str) -> ast.Call | None:
    """The next ``name.backward()`` (also through ``scaler.scale(name)``), unless ``name``
    is bound again first."""
    for item in items:
        node = item.node
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(n, ast.Name) and n.id == name for t in targets for n in ast.walk(t)):
                return None
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "backward"
            and _is_name_or_scaled(node.func.value, name)
        ):
            return node
    return None


def _is_name_or_scaled(expr: ast.expr, name: str) -> bool:
    if isinstance(expr, ast.Name):
        return expr.id == name
    return (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Attribute)
        and expr.func.attr == "scale"
        and len(expr.args) == 1
        and isinstance(expr.args[0], ast.Name)
        and expr.args[0].id == name
    )
