"""DataLoader worker rules: TD405 workers-without-main-guard, TD406 dataloader-created-in-loop.

Both start from a worker-backed ``DataLoader(...)`` call of the file
(:mod:`~torchdoctor.static.analysis.dataloader`): workers started while a script without a
main guard is imported (TD405), or a loader rebuilt on every pass of a loop (TD406). A
loader rebuilt once per pass of the data (read whole by a ``for`` or an epoch helper, or
rebuilt only when the last one's iterator runs out) is information for TD406.
"""

from __future__ import annotations

import ast
import os

from torchdoctor.findings import Confidence, Depth, Severity
from torchdoctor.rules.detectors import detector
from torchdoctor.static.analysis.dataloader import (
    assigned_name,
    is_false,
    loader_arguments,
    loader_calls,
    loads,
    worker_count,
    worker_loaders,
)
from torchdoctor.static.analysis.exhaustion import rebuilt_when_exhausted
from torchdoctor.static.analysis.loops import loop_bound_names
from torchdoctor.static.branches import is_main_guard
from torchdoctor.static.context import Scope
from torchdoctor.static.rules.base import LintRule, line_numbers
from torchdoctor.static.structure import FunctionScope, Item, Loop, ModuleScope

# --- TD405 -------------------------------------------------------------------------------


@detector("TD405", depth=Depth.LINT)
class WorkersWithoutMainGuard(LintRule):
    """Worker processes started while an unguarded script is being imported."""

    # "loader": a script whose loaders a helper of another module builds names only them
    requires = ("DataLoader", "loader")
    needs_structure = True

    def leave_module(self, module: ModuleScope) -> None:
        if _has_main_guard(module.node):
            return
        ctx = self.ctx
        scopes: list[tuple[Scope, list[Item]]] = [(None, module.items)]
        scopes += [(f, f.items) for f in self._run_at_import(module)]
        bodies: list[ast.AST] = [_module_code(module.node)]
        bodies += [scope.node for scope, _ in scopes if scope is not None]
        starting: list[tuple[ast.Call, dict[str, ast.expr], int | None, Scope]] = []
        for scope, items in scopes:
            for call in loader_calls(ctx, items, scope):
                arguments = loader_arguments(call)
                workers = worker_count(ctx, arguments.get("num_workers"), scope)
                context = arguments.get("multiprocessing_context")
                if workers == 0 or isinstance(context, ast.Constant) and context.value == "fork":
                    continue
                target = assigned_name(items, call)
                if isinstance(target, ast.Name) and not any(
                    loads(body, target.id) for body in bodies
                ):
                    continue  # built but never used while importing: no worker starts
                starting.append((call, arguments, workers, scope))
        if starting:
            # One finding per script: every loader fails for the one missing guard.
            starting.sort(key=lambda found: (found[0].lineno, found[0].col_offset))
            call, arguments, workers, scope = starting[0]
            self._report(call, arguments, workers, scope, [c.lineno for c, *_ in starting[1:]])
            return
        self._loaders_from_another_module(module, bodies[0])

    def _loaders_from_another_module(self, module: ModuleScope, code: ast.AST) -> None:
        """DG-Net's ``train.py``: module-level code binds the loaders a function of
        another module of the project builds (``train_loader_a, ... =
        get_all_data_loaders(config)``) and iterates them, so their workers start while
        the script is imported."""
        ctx = self.ctx
        for item in module.items:
            node = item.node
            if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)):
                continue
            if ctx.resolve_local_call(node.value, None) is not None:
                continue  # a function of this file: its loaders are read above
            names = [n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)]
            if not any(loads(code, name) for name in names if "loader" in name.lower()):
                continue
            qualified = ctx.qualified_name(node.value.func)
            helper = ctx.project.function(qualified, ctx.path) if qualified else None
            if helper is None:
                continue
            built = worker_loaders(ctx.project, helper.path, helper.name)
            if built is not None:
                self._report_helper(node.value, helper.name, helper.path, built)
                return

    def _report_helper(self, call: ast.Call, name: str, path: str, loader_line: int) -> None:
        where = f"{os.path.relpath(path)}:{loader_line}"
        self.report(
            call,
            f"`{name}(...)` at line {call.lineno} builds DataLoaders with worker processes "
            f"({where}), and module-level code iterates them, but this script has no "
            '`if __name__ == "__main__":` guard: with the spawn/forkserver start method '
            "(Windows, macOS, Linux from Python 3.14) every worker re-imports the script "
            'and the run fails with "An attempt has been made to start a new process before '
            'the current process has finished its bootstrapping phase"',
            fix_hint="Move the program into a function and call it under "
            '`if __name__ == "__main__":`.',
            confidence=Confidence.MEDIUM,
        )

    def _run_at_import(self, module: ModuleScope) -> list[FunctionScope]:
        """Functions of this file that module-level code calls, directly or not."""
        reached: list[FunctionScope] = []
        pending: list[tuple[Scope, list[Item]]] = [(None, module.items)]
        while pending:
            scope, items = pending.pop()
            for item in items:
                node = item.node
                if not isinstance(node, ast.Call):
                    continue
                for function in self._callees(node, scope):
                    if function not in reached:
                        reached.append(function)
                        pending.append((function, function.items))
        return reached

    def _callees(self, call: ast.Call, scope: Scope) -> list[FunctionScope]:
        ctx = self.ctx
        function = ctx.resolve_local_call(call, scope)
        if function is not None:
            return [function]
        if isinstance(call.func, ast.Name):
            cls = ctx.local_class(call.func.id)
            init = None if cls is None else cls.methods.get("__init__")
            if init is not None:
                return [init]
        return []

    def _report(
        self,
        call: ast.Call,
        arguments: dict[str, ast.expr],
        workers: int | None,
        scope: Scope,
        others: list[int],
    ) -> None:
        ctx = self.ctx
        spelled = ctx.segment(arguments["num_workers"]) if "num_workers" in arguments else "?"
        where = (
            "at module level"
            if scope is None
            else f"in `{scope.name}()`, which module-level code calls"
        )
        more = ""
        if others:
            more = f" (so do the loader{'s' * (len(others) > 1)} at {line_numbers(others)})"
        self.report(
            call,
            f"`DataLoader(..., num_workers={spelled})` at line {call.lineno} starts worker "
            f"processes {where}{more}, and this script has no "
            '`if __name__ == "__main__":` guard: '
            "with the spawn/forkserver start method (Windows, macOS, Linux from Python "
            '3.14) every worker re-imports the script and the run fails with "An attempt '
            "has been made to start a new process before the current process has finished "
            'its bootstrapping phase"',
            fix_hint="Move the program into a function and call it under "
            '`if __name__ == "__main__":`.',
            confidence=Confidence.HIGH if workers is not None else Confidence.MEDIUM,
            evidence={"other_loader_lines": others} if others else None,
        )


def _has_main_guard(tree: ast.Module) -> bool:
    stack: list[ast.stmt] = list(tree.body)
    while stack:
        statement = stack.pop()
        if isinstance(statement, ast.If):
            if is_main_guard(statement.test):
                return True
            stack.extend(statement.body + statement.orelse)
        elif isinstance(statement, ast.Try):
            stack.extend(statement.body + statement.orelse + statement.finalbody)
    return False


def _module_code(tree: ast.Module) -> ast.Module:
    """The module without its function and class bodies (code that runs on import)."""
    body = [
        s
        for s in tree.body
        if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    ]
    return ast.Module(body=body, type_ignores=[])


# --- TD406 -------------------------------------------------------------------------------

_INVARIANT_CALLS = ("torch.", "functools.partial")


@detector("TD406", depth=Depth.LINT)
class LoaderBuiltInLoop(LintRule):
    """A worker-backed DataLoader rebuilt with the same arguments on every loop pass."""

    requires = ("DataLoader",)

    def leave_loop(self, loop: Loop) -> None:
        ctx = self.ctx
        scope = loop.function
        direct = [i for i in loop.items if loop.is_direct(i)]
        for call in loader_calls(ctx, direct, scope):
            arguments = loader_arguments(call)
            workers = worker_count(ctx, arguments.get("num_workers"), scope)
            if workers == 0 or not self._invariant(call, loop):
                continue
            target = assigned_name(direct, call)
            if not _iterated_in(loop.node, call, target):
                continue
            exhausted = rebuilt_when_exhausted(loop.node, call)
            whole_pass = exhausted or _whole_pass(loop.node, call, target)
            self._report(call, arguments, loop, whole_pass, exhausted)

    def _invariant(self, call: ast.Call, loop: Loop) -> bool:
        """No argument depends on a name the loop binds, or on a call we cannot judge."""
        bound = loop_bound_names(loop)
        for node in ast.walk(call):
            if isinstance(node, ast.Name) and node.id in bound:
                return False
            if isinstance(node, ast.Call) and node is not call:
                name = self.ctx.qualified_name(node.func, loop.function) or ""
                if not name.startswith(_INVARIANT_CALLS):
                    return False
        return True

    def _report(
        self,
        call: ast.Call,
        arguments: dict[str, ast.expr],
        loop: Loop,
        whole_pass: bool,
        exhausted: bool,
    ) -> None:
        ctx = self.ctx
        workers = ctx.segment(arguments["num_workers"])
        # A loader rebuilt once the last one's iterator runs out (StopIteration, a None
        # from next(it, None)) is one loader per pass of the data, not per loop pass.
        when = (
            f"each time the iterator read in the loop at line {loop.line} runs out"
            if exhausted
            else f"on every pass of the loop at line {loop.line}"
        )
        evidence: dict[str, object] = {"loop_line": loop.line}
        if exhausted:
            evidence["rebuilt"] = "when_exhausted"
        persistent = arguments.get("persistent_workers")
        if persistent is not None and not is_false(persistent):
            cost = (
                f"each new loader starts its {workers} worker processes again while training "
                "waits; `persistent_workers=True` keeps workers alive only for one loader "
                "object, so here it does nothing"
            )
        elif whole_pass:
            # One full pass per loader: a loader built once restarts its workers at each
            # new pass anyway unless persistent_workers=True, so rebuilding costs nothing.
            self.report(
                call,
                f"`DataLoader(..., num_workers={workers})` at line {call.lineno} is rebuilt "
                f"{when} and read whole each time: "
                "this costs what reusing one loader costs (its workers restart at each new "
                "pass too), but a loader built once with `persistent_workers=True` would "
                "keep its workers",
                fix_hint="Build the DataLoader once, before the loop, with "
                "`persistent_workers=True`, to keep its workers across passes.",
                evidence=evidence,
                severity=Severity.INFO,
            )
            return
        else:
            cost = (
                f"each new loader starts its {workers} worker processes again while "
                "training waits, for the few batches read from it"
            )
        self.report(
            call,
            f"`DataLoader(..., num_workers={workers})` at line {call.lineno} is rebuilt with "
            f"the same arguments {when}: {cost}",
            fix_hint="Build the DataLoader once, before the loop; iterating it again gives a "
            "new shuffle order each epoch.",
            evidence=evidence,
        )


def _whole_pass(body: ast.AST, call: ast.Call, target: ast.expr | None) -> bool:
    """Whether each loader the loop builds is read whole: looped over by a ``for`` (also
    through ``enumerate``/``tqdm``), or handed to a call other than ``iter``/``next``
    (an epoch helper). ``next(iter(loader))`` reads a few batches of it."""
    if not isinstance(target, ast.Name) and target is not None:
        return False  # self.loader = DataLoader(...): read anywhere, by anyone
    name = target.id if target is not None else None
    return _looped_over(body, call, name) or _passed_on(body, name, readers=False)


def _iterated_in(body: ast.AST, call: ast.Call, target: ast.expr | None) -> bool:
    """Whether a loader call (or the name it is bound to) is looped over or passed on."""
    name = target.id if isinstance(target, ast.Name) else None
    return (
        _looped_over(body, call, name)
        or _passed_on(body, name, readers=True)
        or isinstance(target, ast.Attribute)
    )


def _looped_over(body: ast.AST, call: ast.Call, name: str | None) -> bool:
    """A ``for`` inside ``body`` iterates the loader call itself or the name bound to it,
    or a generator hands it on whole (``yield from loader``)."""
    for node in ast.walk(body):
        if isinstance(node, (ast.For, ast.AsyncFor)) and node is not body:
            iterated: ast.expr = node.iter
        elif isinstance(node, ast.YieldFrom):
            iterated = node.value
        else:
            continue
        if any(n is call for n in ast.walk(iterated)):
            return True
        if name is not None and loads(iterated, name):
            return True
    return False


def _passed_on(body: ast.AST, name: str | None, *, readers: bool) -> bool:
    """A call inside ``body`` takes ``name`` as an argument; ``iter()`` and ``next()``
    count only with ``readers`` (they read a few batches, not a pass)."""
    if name is None:
        return False
    for node in ast.walk(body):
        if (
            isinstance(node, ast.Call)
            and (readers or not (isinstance(node.func, ast.Name) and node.func.id in _READERS))
            and any(
                isinstance(a, ast.Name) and a.id == name
                for a in [*node.args, *(k.value for k in node.keywords)]
            )
        ):
            return True
    return False


_READERS = ("iter", "next")
