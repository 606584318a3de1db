"""What an optimizer is given: TD603 duplicate-parameters-in-optimizer (lint's half).

``Adam(list(self.disc_a.parameters()) + list(self.disc_a.parameters()))``: one module's
parameters handed twice to one optimizer (``check`` finds every repeated parameter in the
built optimizer). Within a group PyTorch only warns, keeps both and updates those
parameters twice per step; and a repeated module in a list of modules is a copy-paste, so
the module meant in its place is in no optimizer and never trains. Modules of the same
owner that no optimizer of the file takes are named as the likely missing ones.
"""

from __future__ import annotations

import ast

from torchdoctor.findings import Depth
from torchdoctor.rules.detectors import detector
from torchdoctor.static import torchapi
from torchdoctor.static.analysis.calls import method_call, receiver
from torchdoctor.static.analysis.optimized import (
    covers,
    is_optimizer,
    optimized_models,
    optimizer_params,
)
from torchdoctor.static.context import FileContext, Scope
from torchdoctor.static.rules.base import LintRule
from torchdoctor.static.structure import ModuleScope


@detector("TD603", depth=Depth.LINT)
class DuplicateParametersInOptimizer(LintRule):
    """One module's ``parameters()`` given twice to one optimizer."""

    requires = ("parameters(",)
    needs_structure = True

    def leave_module(self, module: ModuleScope) -> None:
        ctx = self.ctx
        for scope, items in module.bodies():
            for item in items:
                call = item.node
                if not isinstance(call, ast.Call) or not (call.args or call.keywords):
                    continue
                if not is_optimizer(ctx, call, scope):
                    continue
                repeated = next(
                    (
                        _module_of(r)
                        for roots in _whole_modules(ctx, call, scope)
                        for i, r in enumerate(roots)
                        if any(_overlaps(r, earlier) for earlier in roots[:i])
                    ),
                    None,
                )
                if repeated is not None:
                    self._report(call, repeated, scope, module)

    def _report(self, call: ast.Call, repeated: str, scope: Scope, module: ModuleScope) -> None:
        missing = self._untrained_siblings(repeated, scope, module)
        likely = (
            f"; `{'`, `'.join(missing)}` of the same owner is in no optimizer and never trains"
            if missing
            else ""
        )
        self.report(
            call,
            f"The optimizer built at line {call.lineno} is given `{repeated}.parameters()` "
            "twice: within a group PyTorch only warns and updates those parameters twice "
            "per step (across groups it refuses them), and a repeated module is usually a "
            f"copy-paste of the one meant in its place{likely}",
            fix_hint="List each module once, and check which module the second entry was "
            "meant to be.",
            evidence={"repeated": repeated, "untrained": missing},
        )

    def _untrained_siblings(self, repeated: str, scope: Scope, module: ModuleScope) -> list[str]:
        """``self.<attr>`` modules of the owner class that no optimizer of the file takes."""
        owner = scope.owner if scope is not None else None
        if owner is None or not repeated.startswith("self.") or repeated.count(".") != 1:
            return []
        trained = optimized_models(self.ctx, module) or frozenset()
        found: list[str] = []
        for method in owner.methods.values():
            for item in method.items:
                node = item.node
                if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
                    continue
                target = node.targets[0]
                if not (
                    isinstance(target, ast.Attribute)
                    and isinstance(target.value, ast.Name)
                    and target.value.id == "self"
                    and isinstance(node.value, ast.Call)
                ):
                    continue
                path = f"self.{target.attr}"
                if path in found or any(covers(t, path) for t in trained):
                    continue
                if self.ctx.is_in_family(node.value, torchapi.MODULE, method):
                    found.append(path)
        return found


_FILTERING = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp, ast.Lambda)
# Bounds the alternatives followed through nested conditional expressions.
_MAX_ALTERNATIVES = 16


def _whole_modules(ctx: FileContext, call: ast.Call, scope: Scope) -> list[list[str]]:
    """Each list of modules whose every parameter the optimizer may be given, in order:
    each ``m.parameters()`` outside a comprehension or ``filter(...)`` (a group of one
    module's biases beside a group of its weights splits it, it does not repeat it). The
    branches of a conditional expression are alternatives, one list each
    (``chain(unet.parameters(), te.parameters()) if both else unet.parameters()``)."""
    params = optimizer_params(ctx, call, scope)
    return [] if params is None else _alternatives(ctx, params)


def _overlaps(one: str, other: str) -> bool:
    """Whether two receivers' parameters overlap: the same module, or one a part of the
    other (``model`` and ``model.fc``, ``layers`` and ``layers[0]``). Two different
    indices or slices of one container (``layers[i]``, ``layers[i + 1:]``) do not."""
    shorter, longer = sorted((one, other), key=len)
    return longer == shorter or longer.startswith((shorter + ".", shorter + "["))


def _module_of(receiver: str) -> str:
    """The repeated module's name in the message: the receiver without a trailing index."""
    return receiver.split("[", 1)[0] if receiver.endswith("]") else receiver


def _alternatives(ctx: FileContext, node: ast.AST) -> list[list[str]]:
    if isinstance(node, _FILTERING) or (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "filter"
    ):
        return [[]]
    if (
        isinstance(node, ast.Subscript)
        and not method_call(node.value, "parameters")
        and any(method_call(n, "parameters") for n in ast.walk(node.value))
    ):
        return [[]]  # `list(net.parameters())[:-2]` beside `[-2:]`: slices split one list
    if method_call(node, "parameters"):
        # The receiver as written (indices and slices kept): `layers[i]` and `layers[i+1:]`
        # are different modules, `layers` and `layers[0]` overlap.
        return [["".join(ctx.segment(receiver(node)).split())]]
    if isinstance(node, ast.IfExp):
        return (_alternatives(ctx, node.body) + _alternatives(ctx, node.orelse))[:_MAX_ALTERNATIVES]
    out: list[list[str]] = [[]]
    for child in ast.iter_child_nodes(node):
        tails = _alternatives(ctx, child)
        out = [head + tail for head in out for tail in tails][:_MAX_ALTERNATIVES]
    return out
