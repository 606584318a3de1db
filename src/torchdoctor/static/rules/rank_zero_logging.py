"""TD815 local-loss-logged-as-global: rank 0 logs its own batch's loss as the job's.

In a data-parallel script (a DDP or FSDP model built in the file), each rank computes the
loss of its own slice of the global batch. A log that runs only on rank 0 (``if rank ==
0:``, ``if dist.get_rank() == 0``, ``if master_process``) and writes that loss, or a
value made from it (``loss.item() * accum``, a running sum, a list of losses), without
any ``all_reduce`` / ``reduce`` / ``all_gather`` in the function or the helpers it calls,
shows one rank's noise as the training curve. Advice (info): the training itself is
right.

The loss is followed with :mod:`.loss_trail` (assignments, ``+=``, ``.append()``, its
own methods, arithmetic, a step helper that returns it); a helper called under the rank-0
guard that logs a parameter (``self.log_step(loss.item())``) is followed one call deep.
Any other call (a metrics object, a reducing helper) ends the trail: quiet when unsure.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass

from torchdoctor.findings import Depth
from torchdoctor.rules.detectors import detector
from torchdoctor.static import torchapi
from torchdoctor.static.analysis.calls import last_name
from torchdoctor.static.analysis.events import helper_to_follow
from torchdoctor.static.analysis.loops import guard_between
from torchdoctor.static.analysis.loss_trail import (
    carries,
    loss_seeds,
    returning_loss,
    trail,
)
from torchdoctor.static.analysis.ranks import Resolve, is_rank_nonzero, is_rank_zero, resolver
from torchdoctor.static.context import FileContext, Scope
from torchdoctor.static.rules.base import LintRule
from torchdoctor.static.structure import Frame, FrameKind, FunctionScope, Item, ModuleScope

__all__ = ["LocalLossLoggedAsGlobal"]

_REDUCE_WORDS = frozenset({"reduce", "reduced", "gather", "gathered", "allreduce", "allgather"})
_SPAN_WORDS = frozenset({"across", "between", "all", "sync"})
_GROUP_WORDS = frozenset({"processes", "ranks", "replicas", "devices", "gpus", "workers", "nodes"})
_LOG_NAMES = frozenset(
    {
        "print",
        "add_scalar",
        "add_scalars",
        "set_postfix",
        "set_postfix_str",
        "set_description",
        "write",
        "info",
        "debug",
        "warning",
    }
)


@dataclass(frozen=True, slots=True)
class _Log:
    """A rank-0-only call that logs the local loss (or hands it to a helper that does)."""

    call: ast.Call
    value: str
    helper: str | None


@detector("TD815", depth=Depth.LINT)
class LocalLossLoggedAsGlobal(LintRule):
    """``if rank == 0: print(loss.item())`` in a DDP script with no reduction of it."""

    requires = ("DistributedDataParallel", "FullyShardedDataParallel", "fully_shard")
    needs_structure = True

    def leave_module(self, module: ModuleScope) -> None:
        ctx = self.ctx
        if not _data_parallel(ctx, module):
            return
        seeds = loss_seeds(ctx)
        if not seeds:
            return
        returning = returning_loss(ctx, seeds)
        reported: set[int] = set()
        for scope, items in module.bodies():
            tainted = trail(ctx, scope, items, seeds.get(scope, set()), returning)
            if not tainted or _reduces(ctx, scope, items, 0, set(), tainted):
                continue
            for log in _rank_zero_logs(ctx, scope, items, tainted):
                if id(log.call) not in reported:
                    reported.add(id(log.call))
                    self._report(log)

    def _report(self, log: _Log) -> None:
        ctx = self.ctx
        call = log.call
        via = f" (through `{log.helper}`)" if log.helper else ""
        self.report(
            call,
            f"`{ctx.segment(call.func)}(...)` at line {call.lineno} runs on rank 0 only and "
            f"logs `{log.value}`{via}, a loss computed from rank 0's own batches only: "
            "nothing all-reduces it first, so the logged curve is one rank's share of the "
            "data (noisier by about the square root of the number of ranks), not the job's "
            "training loss",
            fix_hint="Average it over ranks before logging, on every rank: `avg = "
            "loss.detach().clone(); dist.all_reduce(avg); avg /= dist.get_world_size()`, "
            "then log `avg.item()` on rank 0 (or label the value as rank 0's loss).",
        )


def _data_parallel(ctx: FileContext, module: ModuleScope) -> bool:
    """Whether the file builds a DDP or FSDP model."""
    return any(
        isinstance(item.node, ast.Call)
        and ctx.is_call_to(item.node, torchapi.DDP, *torchapi.FSDP1, *torchapi.FSDP2, scope=scope)
        for scope, items in module.bodies()
        for item in items
    )


def _reduces(
    ctx: FileContext,
    scope: Scope,
    items: Iterable[Item],
    depth: int,
    seen: set[int],
    tainted: set[str] | None = None,
) -> bool:
    """Whether the function, or a helper of the file it calls, reduces across ranks. With
    ``tainted``, a collective of the function itself counts only when it takes the loss
    (or a value made from it), or takes nothing the rule can judge (``meter.sync()``):
    an all-reduce of the accuracy alone does not make the logged loss global."""
    for item in items:
        call = item.node
        if not isinstance(call, ast.Call):
            continue
        if _reducing_name(call) and (tainted is None or _takes(ctx, call, scope, tainted)):
            return True
        called = helper_to_follow(ctx, call, scope, depth, seen, instances=True)
        if called is not None:
            seen.add(id(called))
            if _reduces(ctx, called, called.items, depth + 1, seen):
                return True
    return False


def _takes(ctx: FileContext, call: ast.Call, scope: Scope, tainted: set[str]) -> bool:
    values = [*call.args, *(k.value for k in call.keywords)]
    if isinstance(call.func, ast.Attribute):
        values.append(call.func.value)
    arguments = [*call.args, *call.keywords]
    return not arguments or any(carries(ctx, v, scope, tainted) for v in values)


def _reducing_name(call: ast.Call) -> bool:
    """``dist.all_reduce``, ``reduce_tensor``, ``accelerator.gather``,
    ``meter.synchronize_between_processes``, ``average_across_ranks``..."""
    func = call.func
    name = last_name(func)
    words = set(torchapi.name_tokens(name))
    return bool(words & _REDUCE_WORDS) or (
        bool((words & _SPAN_WORDS) | {w for w in words if w.startswith("sync")})
        and bool(words & _GROUP_WORDS)
    )


def _rank_zero_logs(
    ctx: FileContext, scope: Scope, items: Iterable[Item], tainted: set[str]
) -> list[_Log]:
    """Calls that run on rank 0 only (under a rank-0 ``if``, after an ``if rank != 0:
    return``, or of a ``@rank_zero_only`` helper) and log the local loss."""
    items = list(items)
    resolve = resolver(ctx, scope)
    exits = _exits_off_rank_zero(items, resolve)
    found = []
    for item in items:
        call = item.node
        if not isinstance(call, ast.Call):
            continue
        guarded = _under_rank_zero(item, resolve) or any(
            exit_line < item.line and (loop is None or loop in item.frames)
            for exit_line, loop in exits
        )
        helper = helper_to_follow(ctx, call, scope, 0, (), instances=True)
        if not guarded and not (
            helper is not None and any(is_rank_zero(d) for d in helper.node.decorator_list)
        ):
            continue
        value = _logged(ctx, call, scope, tainted)
        if value is not None:
            found.append(_Log(call, value, None))
        elif helper is not None:
            logged = _logged_by_helper(ctx, call, scope, helper, tainted)
            if logged is not None:
                found.append(_Log(call, logged, helper.name))
    return found


def _under_rank_zero(item: Item, resolve: Resolve) -> bool:
    return (
        guard_between(
            item.frames,
            None,
            lambda node, in_body: (
                is_rank_zero(node.test, resolve) if in_body else is_rank_nonzero(node.test, resolve)
            ),
        )
        is not None
    )


def _exits_off_rank_zero(items: list[Item], resolve: Resolve) -> list[tuple[int, Frame | None]]:
    """``if rank != 0: return`` (the line, ``None``) and ``if not is_main: continue`` (the
    line and the loop it continues): what follows runs on rank 0 only."""
    found: list[tuple[int, Frame | None]] = []
    for item in items:
        node = item.node
        if not isinstance(node, (ast.Return, ast.Continue)):
            continue
        guard = guard_between(
            item.frames,
            None,
            lambda n, in_body: (
                is_rank_nonzero(n.test, resolve) if in_body else is_rank_zero(n.test, resolve)
            ),
        )
        if guard is None:
            continue
        loop = None
        if isinstance(node, ast.Continue):
            loop = next((f for f in reversed(item.frames) if f.kind is FrameKind.LOOP), None)
            if loop is None:
                continue
        found.append((item.line, loop))
    return found


def _logged(ctx: FileContext, call: ast.Call, scope: Scope, tainted: set[str]) -> str | None:
    """The text of the local-loss argument a logging call writes, if it writes one."""
    if not _is_log_call(ctx, call, scope):
        return None
    for argument in [*call.args, *(k.value for k in call.keywords)]:
        if carries(ctx, argument, scope, tainted):
            return _short(ctx, argument, scope, tainted)
    return None


def _is_log_call(ctx: FileContext, call: ast.Call, scope: Scope) -> bool:
    func = call.func
    name = last_name(func)
    if name in _LOG_NAMES:
        return True
    words = set(torchapi.name_tokens(name))
    if words & {"log", "logs", "print"}:
        return True
    qualified = ctx.qualified_name(func, scope) or ""
    return qualified.startswith("logging.")


def _short(ctx: FileContext, argument: ast.expr, scope: Scope, tainted: set[str]) -> str:
    """The smallest piece of a logged argument that carries the loss (``loss.item()``
    inside an f-string)."""
    best = argument
    for node in ast.walk(argument):
        if (
            isinstance(node, (ast.Name, ast.Attribute, ast.Call))
            and carries(ctx, node, scope, tainted)
            and len(ctx.segment(node)) < len(ctx.segment(best))
        ):
            best = node
    for node in ast.walk(argument):  # prefer `loss.item()` over the bare `loss` inside it
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.value is best
        ):
            best = node
            break
    text = ctx.segment(best)
    return text if len(text) <= 40 and "\n" not in text else text[:37] + "..."


def _logged_by_helper(
    ctx: FileContext, call: ast.Call, scope: Scope, helper: FunctionScope, tainted: set[str]
) -> str | None:
    """``self.log_step(step, loss.item())`` under the guard, with a helper that logs that
    parameter: the loss argument's text."""
    args = helper.node.args
    positional = [a.arg for a in args.posonlyargs + args.args]
    if helper.self_name is not None and positional:
        positional = positional[1:]
    passed: dict[str, ast.expr] = {}
    for index, argument in enumerate(call.args):
        if isinstance(argument, ast.Starred):
            break
        if index < len(positional):
            passed[positional[index]] = argument
    passed.update({k.arg: k.value for k in call.keywords if k.arg is not None})
    carrying = {name: v for name, v in passed.items() if carries(ctx, v, scope, tainted)}
    if not carrying or _reduces(ctx, helper, helper.items, 1, set()):
        return None
    inner = trail(ctx, helper, helper.items, set(carrying), {})
    for item in helper.items:
        if isinstance(item.node, ast.Call) and _logged(ctx, item.node, helper, inner) is not None:
            return _short(ctx, next(iter(carrying.values())), scope, tainted)
    return None
