"""TD814 clip-norm-from-local-shard: ``torch.nn.utils.clip_grad_norm_`` over an FSDP model.

A ``FullyShardedDataParallel`` (FSDP1) model with a sharding strategy (the default
``FULL_SHARD``, ``SHARD_GRAD_OP``, the hybrid ones) holds on each rank only its shard of
every gradient, flat parameters or ``use_orig_params=True`` alike. ``torch.nn.utils``'s
``clip_grad_norm_`` sums the squares of the gradients it is given, so each rank computes
the norm of its own shard and scales by its own factor: the ranks clip differently and
the total norm is never the model's. FSDP1's own ``model.clip_grad_norm_(max_norm)``
all-reduces the shard norms first. FSDP2 (``fully_shard``) and tensor parallelism
(``parallelize_module``) give DTensor parameters, whose norm torch's ``clip_grad_norm_``
reduces across the mesh: quiet for those, and for ``NO_SHARD``.
"""

from __future__ import annotations

import ast

from torchdoctor.findings import Applicability, Depth, Fix
from torchdoctor.rules.detectors import detector
from torchdoctor.static.analysis.callers import passed_values
from torchdoctor.static.bindings import BindingKind
from torchdoctor.static.context import FileContext, Scope
from torchdoctor.static.rules.base import LintRule
from torchdoctor.static.structure import ModuleScope
from torchdoctor.static.torchapi import (
    CLIP_GRAD_NORM,
    CLIP_GRAD_NORM_ONLY_ARGUMENTS,
    FSDP1,
    FSDP_SHARDING_STRATEGIES,
)
from torchdoctor.static.values import constructor_of

__all__ = ["ClipNormFromLocalShard"]

# How many names bound to one another the clipped value is read back through.
_MAX_DEPTH = 3


@detector("TD814", depth=Depth.LINT)
class ClipNormFromLocalShard(LintRule):
    """``torch.nn.utils.clip_grad_norm_(fsdp_model.parameters(), ...)`` with sharding."""

    requires = ("FullyShardedDataParallel",)
    needs_structure = True

    def leave_module(self, module: ModuleScope) -> None:
        ctx = self.ctx
        for scope, items in module.bodies():
            for item in items:
                call = item.node
                if not isinstance(call, ast.Call) or not ctx.is_call_to(
                    call, *CLIP_GRAD_NORM, scope=scope
                ):
                    continue
                clipped = _first_argument(call)
                if clipped is None:
                    continue
                for model in _parameter_owners(self, clipped, scope, 0):
                    wrap = self._sharded_wrap(model, scope) or self._wrapped_before(
                        model, scope, call.lineno
                    )
                    if wrap is not None:
                        self._report(call, clipped, model, wrap)
                        break

    def _sharded_wrap(self, model: ast.expr, scope: Scope) -> ast.Call | None:
        """The ``FullyShardedDataParallel(...)`` call with sharding that built ``model``:
        in this scope, or in what the file's callers pass for a parameter."""
        ctx = self.ctx
        made = constructor_of(ctx, model, scope)
        if made is not None and ctx.is_call_to(made, *FSDP1, scope=scope):
            return made if self._shards(made, scope) else None
        if isinstance(model, ast.Name):
            for value, caller, _call in passed_values(ctx, model, scope):
                made = constructor_of(ctx, value, caller)
                if (
                    made is not None
                    and ctx.is_call_to(made, *FSDP1, scope=caller)
                    and self._shards(made, caller)
                ):
                    return made
        return None

    def _wrapped_before(self, model: ast.expr, scope: Scope, line: int) -> ast.Call | None:
        """A sharding ``FSDP(...)`` earlier in the same function (or, for ``self.x``, in
        ``__init__``) that wraps the clipped module itself (after ``FSDP(net)``,
        ``net.parameters()`` are the local shards too: the flat parameter, or views of
        the shard), or that is assigned to its name on one branch (``if args.fsdp: model =
        FSDP(model)`` ``else: model = DDP(model)``)."""
        ctx = self.ctx
        text = ctx.segment(model)
        if not isinstance(model, (ast.Name, ast.Attribute)):
            return None
        # an assignment counts only when the value at the clip is undecided (branches)
        undecided = constructor_of(ctx, model, scope) is None
        for wrap_scope, items in ctx.module.bodies():
            same = wrap_scope is scope
            in_init = (
                wrap_scope is not None
                and scope is not None
                and wrap_scope.name == "__init__"
                and wrap_scope.owner is not None
                and wrap_scope.owner is scope.owner
                and text.startswith(f"{scope.self_name}.")
            )
            if not (same or in_init):
                continue
            for item in items:
                call = _wrap_of(ctx, item.node, text, undecided)
                if (
                    call is not None
                    and (in_init or item.line < line)
                    and ctx.is_call_to(call, *FSDP1, scope=wrap_scope)
                    and self._shards(call, wrap_scope)
                ):
                    return call
        return None

    def _shards(self, wrap: ast.Call, scope: Scope) -> bool:
        """Whether the wrap's ``sharding_strategy`` shards gradients (the default does);
        a strategy the file does not spell out counts as unknown, so quiet."""
        strategy = next((k.value for k in wrap.keywords if k.arg == "sharding_strategy"), None)
        if any(k.arg is None for k in wrap.keywords) and strategy is None:
            return False  # FSDP(model, **options): the strategy is not visible
        if strategy is None:
            return True
        if isinstance(strategy, ast.Name):
            binding = self.ctx.binding(strategy, scope)
            if binding is None or binding.kind is not BindingKind.ASSIGN or binding.value is None:
                return False
            strategy = binding.value
        return isinstance(strategy, ast.Attribute) and strategy.attr in FSDP_SHARDING_STRATEGIES

    def _report(self, call: ast.Call, clipped: ast.expr, model: ast.expr, wrap: ast.Call) -> None:
        ctx = self.ctx
        name = ctx.segment(model)
        rest = [ctx.segment(a) for a in call.args[1:]] + [
            f"{k.arg}={ctx.segment(k.value)}"
            for k in call.keywords
            if k.arg not in ("parameters", None)
        ]
        fixable = (
            isinstance(clipped, ast.Call)
            and ctx.segment(clipped) == f"{name}.parameters()"
            and not any(
                k.arg in CLIP_GRAD_NORM_ONLY_ARGUMENTS or k.arg is None for k in call.keywords
            )
            and not any(isinstance(a, ast.Starred) for a in call.args)
        )
        replacement = f"{name}.clip_grad_norm_({', '.join(rest)})"
        fix = (
            Fix(f"Call `{replacement}`", (ctx.replace(call, replacement),), Applicability.UNSAFE)
            if fixable
            else None
        )
        self.report(
            call,
            f"`{ctx.segment(call.func)}(...)` at line {call.lineno} clips the parameters of "
            f"`{name}`, a FullyShardedDataParallel model that shards its gradients (wrapped "
            f"at line {wrap.lineno}): each rank computes the norm of its own shard only, so "
            "the ranks clip by different factors and the returned total norm is not the "
            "model's",
            fix_hint=f"Use FSDP's own method, on every rank: `{replacement}` (it all-reduces "
            "the shard norms before clipping).",
            evidence={"wrap_line": wrap.lineno},
            fix=fix,
        )


def _wrap_of(ctx: FileContext, node: ast.AST, text: str, assigned: bool) -> ast.Call | None:
    """The call of ``FSDP(text)``, or (with ``assigned``) of ``text = <call>``."""
    if isinstance(node, ast.Call) and node.args and ctx.segment(node.args[0]) == text:
        return node
    if (
        assigned
        and isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and isinstance(node.value, ast.Call)
        and ctx.segment(node.targets[0]) == text
    ):
        return node.value
    return None


def _first_argument(call: ast.Call) -> ast.expr | None:
    if call.args:
        first = call.args[0]
        return None if isinstance(first, ast.Starred) else first
    return next((k.value for k in call.keywords if k.arg == "parameters"), None)


def _parameter_owners(rule: LintRule, expr: ast.expr, scope: Scope, depth: int) -> list[ast.expr]:
    """The modules whose ``.parameters()`` a clipped expression draws from:
    ``model.parameters()``, ``list(model.parameters())``, ``[p for p in
    model.parameters() if ...]``, or a name bound to one of those."""
    ctx = rule.ctx
    owners: list[ast.expr] = []
    for node in ast.walk(expr):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "parameters"
            and not node.args
        ):
            owners.append(node.func.value)
        elif isinstance(node, ast.Name) and depth < _MAX_DEPTH and node is expr:
            binding = ctx.binding(node, scope)
            if (
                binding is not None
                and binding.kind is BindingKind.ASSIGN
                and binding.value is not None
            ):
                owners += _parameter_owners(rule, binding.value, scope, depth + 1)
    return owners
