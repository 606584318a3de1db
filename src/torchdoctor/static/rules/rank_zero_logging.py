"""TD815 local-loss-logged-as-global: rank 0 logs its own batch's loss as the job's.

In a data-parallel script (a DDP or FSDP model built in the file), each rank computes the
loss of its own slice of the global batch. A log that runs only on rank 0 (``if rank ==
0:``, ``if dist.get_rank() == 0``, ``if master_process``) and writes that loss, or a
value made from it (``loss.item() * accum``, a running sum, a list of losses), without
any ``all_reduce`` / ``reduce`` / ``all_gather`` in the function or the helpers it calls,
shows one rank's noise as the training curve. Advice (info): the training itself is
right.

Values are followed forward inside a function: assignments, ``+=``, ``.append()``, the
methods of the value (``.item()``, ``.detach()``), arithmetic, f-strings, ``float()`` /
``sum()`` / ``np.mean()``; a helper that returns the loss (``batch_loss =
self._run_batch(...)``) hands it to its caller, and a helper called under the rank-0
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
from torchdoctor.static.context import FileContext, Scope
from torchdoctor.static.rules.base import LintRule
from torchdoctor.static.rules.distributed_saving import _resolver
from torchdoctor.static.rules.loops import guard_between
from torchdoctor.static.rules.ranks import Resolve, is_rank_nonzero, is_rank_zero
from torchdoctor.static.rules.sharded_clipping import FSDP1
from torchdoctor.static.rules.step_sequences import Kind, sequences
from torchdoctor.static.structure import Frame, FrameKind, FunctionScope, Item, ModuleScope

__all__ = ["LocalLossLoggedAsGlobal"]

_DATA_PARALLEL = (
    "torch.nn.parallel.DistributedDataParallel",
    *FSDP1,
    "torch.distributed.fsdp.fully_shard",
    "torch.distributed._composable.fsdp.fully_shard",
)
# Functions that keep a number a number: the trail of the local loss goes through them.
_PASSING_BUILTINS = frozenset(
    {"float", "int", "round", "str", "format", "sum", "max", "min", "abs", "list", "tuple"}
)
_PASSING_QUALIFIED = frozenset(
    {
        "numpy.mean",
        "numpy.average",
        "numpy.sum",
        "statistics.mean",
        "statistics.fmean",
        "math.fsum",
        "torch.stack",
        "torch.cat",
        "torch.tensor",
        "torch.as_tensor",
    }
)
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
_MAX_DEPTH = 2


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
        seeds = _loss_seeds(ctx)
        if not seeds:
            return
        returning = _functions_returning_loss(ctx, seeds)
        reported: set[int] = set()
        for scope, items in module.bodies():
            tainted = _taint(ctx, scope, items, seeds.get(scope, set()), returning)
            if not tainted or _reduces(ctx, scope, items, 0, set()):
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
        isinstance(item.node, ast.Call) and ctx.is_call_to(item.node, *_DATA_PARALLEL, scope=scope)
        for scope, items in module.bodies()
        for item in items
    )


def _loss_seeds(ctx: FileContext) -> dict[Scope, set[str]]:
    """The names ``backward()`` runs on, per function (``loss``, ``self.loss``)."""
    seeds: dict[Scope, set[str]] = {}
    for body in sequences(ctx):
        for action in body.actions:
            if action.kind is Kind.BACKWARD and action.target is not None:
                name = _loss_name(ctx, action.target)
                if name:
                    seeds.setdefault(action.scope, set()).add(name)
    return seeds


def _loss_name(ctx: FileContext, target: ast.expr) -> str:
    """``loss`` for ``loss``, ``scaler.scale(loss)``, ``loss / accumulation``."""
    while True:
        if isinstance(target, ast.BinOp):
            target = target.left
        elif (
            isinstance(target, ast.Call)
            and isinstance(target.func, ast.Attribute)
            and target.func.attr == "scale"
            and len(target.args) == 1
        ):
            target = target.args[0]
        else:
            break
    if isinstance(target, ast.Name):
        return target.id
    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
        return ctx.segment(target)
    return ""


def _functions_returning_loss(
    ctx: FileContext, seeds: dict[Scope, set[str]]
) -> dict[int, tuple[bool, ...]]:
    """Functions that return their local loss: ``id(function)`` -> for each returned
    position (one for a plain ``return x``), whether it carries the loss."""
    found: dict[int, tuple[bool, ...]] = {}
    for scope, names in seeds.items():
        if not isinstance(scope, FunctionScope):
            continue
        tainted = _taint(ctx, scope, scope.items, names, {})
        for item in scope.items:
            node = item.node
            if not isinstance(node, ast.Return) or node.value is None:
                continue
            value = node.value
            elements = value.elts if isinstance(value, ast.Tuple) else [value]
            carried = tuple(_mentions(ctx, e, scope, tainted) for e in elements)
            if any(carried):
                found[id(scope)] = carried
    return found


def _taint(
    ctx: FileContext,
    scope: Scope,
    items: Iterable[Item],
    seeds: set[str],
    returning: dict[int, tuple[bool, ...]],
) -> set[str]:
    """The names of ``scope`` that hold the local loss or a value made from it."""
    tainted = set(seeds)
    items = list(items)
    for _ in range(2):  # twice: a loop can use a name above the line that fills it
        for item in items:
            node = item.node
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets: list[ast.expr] = (
                    node.targets if isinstance(node, ast.Assign) else [node.target]
                )
                if node.value is None:
                    continue
                carried = _carried(ctx, node.value, scope, tainted, returning)
                for target, carries in _pair(targets, carried):
                    if carries:
                        tainted |= _names(ctx, target)
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("append", "extend", "insert")
                and any(_mentions(ctx, a, scope, tainted, returning) for a in node.args)
            ):
                tainted |= _names(ctx, node.func.value)
    return tainted


def _carried(
    ctx: FileContext,
    value: ast.expr,
    scope: Scope,
    tainted: set[str],
    returning: dict[int, tuple[bool, ...]],
) -> tuple[bool, ...]:
    """For a right-hand side: whether it (or each element a tuple target unpacks) carries
    the loss."""
    if isinstance(value, ast.Call):
        called = _called_function(ctx, value, scope)
        if called is not None and id(called) in returning:
            return returning[id(called)]
    return (_mentions(ctx, value, scope, tainted, returning),)


def _pair(targets: list[ast.expr], carried: tuple[bool, ...]) -> list[tuple[ast.expr, bool]]:
    out = []
    for target in targets:
        if isinstance(target, (ast.Tuple, ast.List)) and len(carried) == len(target.elts) > 1:
            out += list(zip(target.elts, carried, strict=True))
        elif len(carried) == 1:
            out.append((target, carried[0]))
    return out


def _names(ctx: FileContext, target: ast.expr) -> set[str]:
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
        return {ctx.segment(target)}
    if isinstance(target, ast.Subscript):  # running[0] += loss.item()
        return _names(ctx, target.value)
    return set()


def _mentions(
    ctx: FileContext,
    expr: ast.expr,
    scope: Scope,
    tainted: set[str],
    returning: dict[int, tuple[bool, ...]] | None = None,
) -> bool:
    """Whether ``expr`` evaluates to the local loss or a number made from it (a call of
    a helper in ``returning`` gives it)."""

    def carries(node: ast.expr) -> bool:
        return _mentions(ctx, node, scope, tainted, returning)

    if isinstance(expr, ast.Name):
        return expr.id in tainted
    if isinstance(expr, ast.Attribute):
        return ctx.segment(expr) in tainted or carries(expr.value)
    if isinstance(expr, ast.Call):
        func = expr.func
        if isinstance(func, ast.Attribute) and carries(func.value):
            return True  # loss.item(), losses.mean()
        if returning:
            called = _called_function(ctx, expr, scope)
            if called is not None and any(returning.get(id(called), ())):
                return True
        passing = (isinstance(func, ast.Name) and func.id in _PASSING_BUILTINS) or (
            ctx.qualified_name(func, scope) in _PASSING_QUALIFIED
        )
        return passing and any(carries(a) for a in expr.args)
    if isinstance(expr, (ast.ListComp, ast.GeneratorExp, ast.SetComp)):
        return any(carries(g.iter) for g in expr.generators)
    if isinstance(expr, ast.Dict):
        return any(carries(v) for v in expr.values if v is not None)
    if isinstance(expr, ast.Lambda):
        return False
    return any(
        carries(child) for child in ast.iter_child_nodes(expr) if isinstance(child, ast.expr)
    )


def _reduces(
    ctx: FileContext, scope: Scope, items: Iterable[Item], depth: int, seen: set[int]
) -> bool:
    """Whether the function, or a helper of the file it calls, reduces across ranks."""
    for item in items:
        call = item.node
        if not isinstance(call, ast.Call):
            continue
        if _reducing_name(call):
            return True
        called = _called_function(ctx, call, scope)
        if called is not None and depth < _MAX_DEPTH and id(called) not in seen:
            seen.add(id(called))
            if _reduces(ctx, called, called.items, depth + 1, seen):
                return True
    return False


def _reducing_name(call: ast.Call) -> bool:
    """``dist.all_reduce``, ``reduce_tensor``, ``accelerator.gather``,
    ``meter.synchronize_between_processes``, ``average_across_ranks``..."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
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
    resolve = _resolver(ctx, scope)
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
        helper = _called_function(ctx, call, scope)
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
        if _mentions(ctx, argument, scope, tainted):
            return _short(ctx, argument, scope, tainted)
    return None


def _is_log_call(ctx: FileContext, call: ast.Call, scope: Scope) -> bool:
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
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
            and _mentions(ctx, node, scope, tainted)
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
    carrying = {name: v for name, v in passed.items() if _mentions(ctx, v, scope, tainted)}
    if not carrying or _reduces(ctx, helper, helper.items, 1, set()):
        return None
    inner = _taint(ctx, helper, helper.items, set(carrying), {})
    for item in helper.items:
        if isinstance(item.node, ast.Call) and _logged(ctx, item.node, helper, inner) is not None:
            return _short(ctx, next(iter(carrying.values())), scope, tainted)
    return None


def _called_function(ctx: FileContext, call: ast.Call, scope: Scope) -> FunctionScope | None:
    """The local function or method a call runs: ``f()``, ``self.f()``, or ``obj.f()`` on
    an instance of a class of this file."""
    found = ctx.resolve_local_call(call, scope)
    if found is not None or not isinstance(call.func, ast.Attribute):
        return found
    type_name = ctx.instance_type(call.func.value, scope)
    if type_name is None or not type_name.startswith("<local>."):
        return None
    cls = ctx.local_class(type_name[len("<local>.") :])
    return cls.methods.get(call.func.attr) if cls is not None else None
