"""Which process runs a place of a file that starts its own workers with ``mp.spawn``.

``mp.spawn(fn, ...)`` starts fresh interpreters that import the file again and run ``fn``:
the module code outside the main guard runs in the launcher and in every worker, ``fn``
and what it calls only in the workers, and the main guard and the functions reached
only from it (or from the function that spawns) only in the launcher. A flag the
launcher sets (``cudnn.benchmark``) is not seen by the workers, and a load the launcher
makes once is not made on every rank.
"""

from __future__ import annotations

import ast
from typing import cast

from torchdoctor.static.analysis.callers import called_function, is_spawn, spawned_argument
from torchdoctor.static.analysis.calls import last_name
from torchdoctor.static.branches import is_main_guard
from torchdoctor.static.context import FileContext, Scope
from torchdoctor.static.structure import Frame, FrameKind, FunctionScope

__all__ = ["launcher_only", "runs_once_beside_spawned_workers", "workers_only"]


def runs_once_beside_spawned_workers(ctx: FileContext, scope: Scope) -> bool:
    """``scope`` is launcher code of a file that starts its own workers with
    ``mp.spawn(fn, ...)``: a function that spawns them, or one reached from there or from
    the main guard, that ``fn`` does not reach (SGL's search spawns ``self._train``, then
    loads the best model in ``self._postprocess()``). Only ``fn`` and what it calls run on
    every rank; the launcher runs once, in one process. Never when the file spawns nothing
    (``torchrun`` runs all of it on every rank), when a spawn's target is no function of
    the file, nor at module level, which every spawned process imports again."""
    in_launcher, in_workers = _reached_by(ctx, scope)
    return in_launcher and not in_workers


def _launcher_functions(ctx: FileContext) -> tuple[set[int], set[int]]:
    """The ids of the functions the launcher reaches (from the functions that spawn and
    from the main guard), and of those every rank reaches (from the spawned targets and
    from module code outside the main guard); two empty sets when the file spawns nothing
    or spawns a target that is not one of its functions."""
    launchers: list[FunctionScope] = []
    targets: list[FunctionScope] = []
    for scope, items in ctx.module.bodies():
        for item in items:
            call = item.node
            if not (
                isinstance(call, ast.Call)
                and last_name(call.func) in ("spawn", "start_processes")
                and is_spawn(ctx, call, scope)
            ):
                continue
            target = _spawned_target(ctx, call, scope)
            if target is None:
                return set(), set()
            targets.append(target)
            if scope is not None:
                launchers.append(scope)
    if not targets:
        return set(), set()
    guarded: list[FunctionScope] = []
    for item in ctx.module.items:
        called = called_function(ctx, item.node, None) if isinstance(item.node, ast.Call) else None
        if called is not None:
            (guarded if _under_main_guard(item.frames) else targets).append(called)
    return _reached(ctx, [*launchers, *guarded]), _reached(ctx, targets)


def _spawned_target(ctx: FileContext, call: ast.Call, scope: Scope) -> FunctionScope | None:
    """The function of the file ``mp.spawn(fn, ...)`` runs: ``worker`` or
    ``self._train``; ``None`` for anything else (``partial(worker)``, an import)."""
    target = spawned_argument(call)
    if not isinstance(target, (ast.Name, ast.Attribute)):
        return None
    return called_function(ctx, ast.Call(func=target, args=[], keywords=[]), scope)


def _under_main_guard(frames: tuple[Frame, ...]) -> bool:
    """Inside ``if __name__ == "__main__":``, which spawned processes do not run."""
    return any(
        frame.kind is FrameKind.IF_BODY and is_main_guard(cast("ast.If", frame.node).test)
        for frame in frames
    )


def _reached(ctx: FileContext, roots: list[FunctionScope]) -> set[int]:
    """The ids of ``roots`` and of every function of the file they call, however deep:
    each function's calls are read once."""
    seen = {id(root) for root in roots}
    frontier = list(roots)
    while frontier:
        scope = frontier.pop()
        for item in scope.items:
            if isinstance(item.node, ast.Call):
                callee = called_function(ctx, item.node, scope)
                if callee is not None and id(callee) not in seen:
                    seen.add(id(callee))
                    frontier.append(callee)
    return seen


def launcher_only(ctx: FileContext, frames: tuple[Frame, ...]) -> bool:
    """The place runs in the launching process only: in the main guard at module level,
    or in a function :func:`runs_once_beside_spawned_workers` places there."""
    scope = ctx.function_of(frames)
    if scope is None:
        return bool(_memo(ctx)[1]) and _under_main_guard(frames)
    return runs_once_beside_spawned_workers(ctx, scope)


def workers_only(ctx: FileContext, scope: Scope) -> bool:
    """``scope`` runs in the spawned workers only: the spawned function, or one it
    reaches, that the launcher does not reach."""
    in_launcher, in_workers = _reached_by(ctx, scope)
    return in_workers and not in_launcher


def _reached_by(ctx: FileContext, scope: Scope) -> tuple[bool, bool]:
    """Whether the launcher, and whether the workers, reach ``scope``: read at the first
    function around it (itself, or one it is nested in: a function nested in a worker
    runs in that worker) that either reaches; neither at module level."""
    once, every_rank = _memo(ctx)
    enclosing: FunctionScope | None = scope if isinstance(scope, FunctionScope) else None
    while enclosing is not None:
        in_launcher, in_workers = id(enclosing) in once, id(enclosing) in every_rank
        if in_launcher or in_workers:
            return in_launcher, in_workers
        enclosing = enclosing.parent
    return False, False


def _memo(ctx: FileContext) -> tuple[set[int], set[int]]:
    key = ("spawned", "launcher_functions")
    if key not in ctx.memo:
        ctx.memo[key] = _launcher_functions(ctx)
    return cast("tuple[set[int], set[int]]", ctx.memo[key])
