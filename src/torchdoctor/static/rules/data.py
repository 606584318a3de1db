"""Data-loading rules: TD405, TD406, TD407, TD408.

All four start from a ``DataLoader(...)`` call of the file and read its arguments by
parameter name, positional or keyword (:func:`loader_arguments`): workers started while a
script without a main guard is imported (TD405), a loader rebuilt on every pass of a loop
(TD406), a training loader that does not shuffle (TD407), and ``non_blocking=True`` copies
of batches that were never pinned (TD408).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from torchdoctor.findings import Applicability, Confidence, Depth, Edit, Fix
from torchdoctor.rules.detectors import detector
from torchdoctor.static import torchapi
from torchdoctor.static.bindings import BindingKind
from torchdoctor.static.context import FileContext, Scope
from torchdoctor.static.rules.base import LintRule
from torchdoctor.static.rules.device import insert_keywords, loop_bound_names
from torchdoctor.static.structure import FunctionScope, Item, Loop, ModuleScope
from torchdoctor.static.training import EventKind, loop_events

__all__ = ["loader_arguments", "loader_of"]

_POSITIONAL = ("dataset", "batch_size", "shuffle", "sampler", "batch_sampler", "num_workers",
               "collate_fn", "pin_memory", "drop_last", "timeout", "worker_init_fn",
               "multiprocessing_context", "generator")
_DATALOADER = "torch.utils.data.DataLoader"
_WRAPPERS = frozenset({"enumerate", "iter", "tqdm", "tqdm.tqdm", "tqdm.auto.tqdm",
                       "tqdm.notebook.tqdm", "rich.progress.track"})


def loader_arguments(call: ast.Call) -> dict[str, ast.expr]:
    """A ``DataLoader(...)`` call's arguments by parameter name."""
    found: dict[str, ast.expr] = {}
    for name, value in zip(_POSITIONAL, call.args, strict=False):
        if isinstance(value, ast.Starred):
            break
        found[name] = value
    for keyword in call.keywords:
        if keyword.arg is not None:
            found[keyword.arg] = keyword.value
    return found


def _workers(ctx: FileContext, value: ast.expr | None, scope: Scope) -> int | None:
    """``num_workers`` as a number: 0 when absent, ``None`` when only known at run time."""
    if value is None:
        return 0
    if isinstance(value, ast.Name):
        found = ctx.lookup(value, scope)
        if found is not None and found[0].kind is BindingKind.ASSIGN and isinstance(
                found[0].value, ast.Constant):
            value = found[0].value
    if isinstance(value, ast.Constant) and isinstance(value.value, int):
        return int(value.value)
    return None


def _is_false(value: ast.expr | None) -> bool:
    return value is None or isinstance(value, ast.Constant) and value.value in (False, None)


def _loader_calls(ctx: FileContext, items: list[Item], scope: Scope) -> Iterator[ast.Call]:
    for item in items:
        node = item.node
        if isinstance(node, ast.Call) and ctx.is_call_to(node, _DATALOADER, scope=scope):
            yield node


def _iterated(ctx: FileContext, expr: ast.expr, scope: Scope) -> ast.expr:
    """``x`` of ``enumerate(x)``, ``tqdm(x)``, ``iter(x)``; else ``expr`` itself."""
    while isinstance(expr, ast.Call) and expr.args:
        func = expr.func
        name = func.id if isinstance(func, ast.Name) and func.id in ("enumerate", "iter") \
            else ctx.qualified_name(func, scope)
        if name not in _WRAPPERS:
            break
        expr = expr.args[0]
    return expr


def loader_of(ctx: FileContext, expr: ast.expr, scope: Scope) -> ast.Call | None:
    """The ``DataLoader(...)`` call a loop's iterable comes from, when the file shows it."""
    expr = _iterated(ctx, expr, scope)
    if isinstance(expr, ast.Name):
        found = ctx.lookup(expr, scope)
        expr = found[0].value if found is not None and found[0].value is not None else expr
        scope = found[1] if found is not None else scope
    elif isinstance(expr, ast.Attribute):
        attribute = ctx.attribute_binding(expr, scope)
        if attribute is not None and attribute[0].value is not None:
            expr, scope = attribute[0].value, attribute[1]
    if isinstance(expr, ast.Call) and ctx.is_call_to(expr, _DATALOADER, scope=scope):
        return expr
    return None


def _assigned_name(items: list[Item], call: ast.Call) -> ast.expr | None:
    """The target of ``name = DataLoader(...)`` for a loader call, if it is assigned."""
    for item in items:
        node = item.node
        if isinstance(node, ast.Assign) and node.value is call and len(node.targets) == 1:
            return node.targets[0]
    return None


def _loads(node: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
               for n in ast.walk(node))


# --- TD405 -------------------------------------------------------------------------------


@detector("TD405", depth=Depth.LINT)
class WorkersWithoutMainGuard(LintRule):
    """Worker processes started while an unguarded script is being imported."""

    requires = ("DataLoader",)
    needs_structure = True

    def leave_module(self, module: ModuleScope) -> None:
        if _has_main_guard(module.node):
            return
        ctx = self.ctx
        scopes: list[tuple[Scope, list[Item]]] = [(None, module.items)]
        scopes += [(f, f.items) for f in self._run_at_import(module)]
        bodies: list[ast.AST] = [_module_code(module.node)]
        bodies += [scope.node for scope, _ in scopes if scope is not None]
        for scope, items in scopes:
            for call in _loader_calls(ctx, items, scope):
                arguments = loader_arguments(call)
                workers = _workers(ctx, arguments.get("num_workers"), scope)
                context = arguments.get("multiprocessing_context")
                if workers == 0 or isinstance(context, ast.Constant) and context.value == "fork":
                    continue
                target = _assigned_name(items, call)
                if isinstance(target, ast.Name) and not any(
                        _loads(body, target.id) for body in bodies):
                    continue  # built but never used while importing: no worker starts
                self._report(call, arguments, workers, scope)

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

    def _report(self, call: ast.Call, arguments: dict[str, ast.expr], workers: int | None,
                scope: Scope) -> None:
        ctx = self.ctx
        spelled = ctx.segment(arguments["num_workers"]) if "num_workers" in arguments else "?"
        where = "at module level" if scope is None else \
            f"in `{scope.name}()`, which module-level code calls"
        self.report(
            call,
            f"`DataLoader(..., num_workers={spelled})` at line {call.lineno} starts worker "
            f"processes {where}, and this script has no `if __name__ == \"__main__\":` guard: "
            "with the spawn/forkserver start method (Windows, macOS, Linux from Python "
            "3.14) every worker re-imports the script and the run fails with \"An attempt "
            "has been made to start a new process before the current process has finished "
            "its bootstrapping phase\"",
            fix_hint="Move the program into a function and call it under "
                     "`if __name__ == \"__main__\":`.",
            confidence=Confidence.HIGH if workers is not None else Confidence.MEDIUM,
        )


def _has_main_guard(tree: ast.Module) -> bool:
    stack: list[ast.stmt] = list(tree.body)
    while stack:
        statement = stack.pop()
        if isinstance(statement, ast.If):
            test = statement.test
            for node in ast.walk(test):
                if isinstance(node, ast.Compare) and any(
                        isinstance(n, ast.Name) and n.id == "__name__"
                        for n in [node.left, *node.comparators]) and any(
                        isinstance(n, ast.Constant) and n.value == "__main__"
                        for n in [node.left, *node.comparators]):
                    return True
            stack.extend(statement.body + statement.orelse)
        elif isinstance(statement, ast.Try):
            stack.extend(statement.body + statement.orelse + statement.finalbody)
    return False


def _module_code(tree: ast.Module) -> ast.Module:
    """The module without its function and class bodies (code that runs on import)."""
    body = [s for s in tree.body if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                       ast.ClassDef))]
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
        for call in _loader_calls(ctx, direct, scope):
            arguments = loader_arguments(call)
            workers = _workers(ctx, arguments.get("num_workers"), scope)
            if workers == 0 or not self._invariant(call, loop):
                continue
            target = _assigned_name(direct, call)
            if not _iterated_in(loop.node, call, target):
                continue
            self._report(call, arguments, loop)

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

    def _report(self, call: ast.Call, arguments: dict[str, ast.expr], loop: Loop) -> None:
        ctx = self.ctx
        workers = ctx.segment(arguments["num_workers"])
        persistent = arguments.get("persistent_workers")
        note = ""
        if persistent is not None and not _is_false(persistent):
            note = ("; `persistent_workers=True` keeps workers alive only for one loader "
                    "object, so here it does nothing")
        self.report(
            call,
            f"`DataLoader(..., num_workers={workers})` at line {call.lineno} is rebuilt with "
            f"the same arguments on every pass of the loop at line {loop.line}: each new "
            f"loader starts its {workers} worker processes again while training waits{note}",
            fix_hint="Build the DataLoader once, before the loop; iterating it again gives a "
                     "new shuffle order each epoch.",
            evidence={"loop_line": loop.line},
        )


def _iterated_in(body: ast.AST, call: ast.Call, target: ast.expr | None) -> bool:
    """Whether a loader call (or the name it is bound to) is looped over or passed on."""
    name = target.id if isinstance(target, ast.Name) else None
    for node in ast.walk(body):
        if isinstance(node, (ast.For, ast.AsyncFor)) and node is not body:
            if any(n is call for n in ast.walk(node.iter)):
                return True
            if name is not None and _loads(node.iter, name):
                return True
        elif isinstance(node, ast.Call) and name is not None and any(
                isinstance(a, ast.Name) and a.id == name for a in
                [*node.args, *(k.value for k in node.keywords)]):
            return True
    return isinstance(target, ast.Attribute)


# --- TD407 -------------------------------------------------------------------------------

_EVAL_WORDS = frozenset({"val", "valid", "validation", "test", "testing", "eval", "evaluation",
                         "dev", "holdout", "pred", "predict", "prediction", "inference", "infer",
                         "calib", "calibration", "score", "scoring", "query", "gallery",
                         "bench", "benchmark", "export", "probe", "unlabeled", "gen"})
_ORDERED_WORDS = frozenset({"stream", "streaming", "iterable", "iter", "shard", "shards",
                            "webdataset", "wds", "sequential", "sequence", "ordered"})


@detector("TD407", depth=Depth.LINT)
class TrainLoaderNotShuffled(LintRule):
    """A DataLoader used for training with neither ``shuffle=True`` nor a sampler."""

    requires = ("DataLoader",)
    needs_structure = True

    def leave_module(self, module: ModuleScope) -> None:
        ctx = self.ctx
        scopes: list[tuple[Scope, list[Item]]] = [(None, module.items)]
        scopes += [(f, f.items) for f in module.functions]
        for scope, items in scopes:
            for call in _loader_calls(ctx, items, scope):
                arguments = loader_arguments(call)
                if any(not _is_false(arguments.get(k)) for k in ("sampler", "batch_sampler")):
                    continue
                shuffle = arguments.get("shuffle")
                if shuffle is not None and not _is_false(shuffle):
                    continue  # shuffle=True, or decided at run time
                target = _assigned_name(items, call)
                confidence = self._training(call, arguments, target, scope)
                if confidence is not None:
                    self._report(call, arguments, target, confidence)

    def _training(self, call: ast.Call, arguments: dict[str, ast.expr],
                  target: ast.expr | None, scope: Scope) -> Confidence | None:
        """How sure we are that this loader feeds training (``None``: it does not)."""
        words = set(_words(target)) | set(_words(arguments.get("dataset")))
        if words & (_EVAL_WORDS | _ORDERED_WORDS) or self._iterable(arguments.get("dataset"),
                                                                    scope):
            return None
        if "train" in words or "training" in words:
            return Confidence.HIGH
        for loop in self.ctx.module.all_loops:
            node = loop.node
            if not isinstance(node, (ast.For, ast.AsyncFor)):
                continue
            source = _iterated(self.ctx, node.iter, loop.function)
            feeds = source is call or (isinstance(target, ast.Name) and isinstance(
                source, ast.Name) and source.id == target.id and loop.function is scope)
            if feeds and any(e.kind is EventKind.BACKWARD for e in loop_events(self.ctx, loop)):
                return Confidence.MEDIUM
        return None

    def _iterable(self, dataset: ast.expr | None, scope: Scope) -> bool:
        """An ``IterableDataset`` (which cannot be shuffled by the loader)."""
        if dataset is None:
            return False
        type_name = self.ctx.instance_type(dataset, scope)
        if type_name is None:
            return False
        if "Iterable" in type_name or "datapipes" in type_name:
            return True
        return type_name.startswith("<local>.") and self.ctx.is_family(
            type_name, "torch.utils.data.IterableDataset")

    def _report(self, call: ast.Call, arguments: dict[str, ast.expr], target: ast.expr | None,
                confidence: Confidence) -> None:
        ctx = self.ctx
        name = ctx.segment(target) if target is not None else "DataLoader(...)"
        shuffle = arguments.get("shuffle")
        if shuffle is not None:
            edit: Edit = ctx.replace(shuffle, "True")
            said = "`shuffle=False`"
        else:
            edit = insert_keywords(ctx, call, "shuffle=True")
            said = "no `shuffle=True`"
        self.report(
            call,
            f"`{name}` at line {call.lineno} feeds training but has {said} and no sampler: "
            "every epoch visits the examples in the same order, so batches are correlated "
            "(often sorted by class or source) and the model learns the order",
            fix_hint="Pass `shuffle=True` to the training DataLoader (keep validation and test "
                     "loaders unshuffled), or a sampler such as `DistributedSampler`.",
            confidence=confidence,
            fix=Fix("Shuffle the training loader", (edit,), Applicability.UNSAFE),
        )


def _words(expr: ast.expr | None) -> list[str]:
    """Words of the names in an expression (``self.train_loader`` -> train, loader)."""
    if expr is None:
        return []
    words: list[str] = []
    for node in ast.walk(expr):
        if isinstance(node, ast.Name):
            words += torchapi.name_tokens(node.id)
        elif isinstance(node, ast.Attribute):
            words += torchapi.name_tokens(node.attr)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            words += torchapi.name_tokens(node.value)
    return words


# --- TD408 -------------------------------------------------------------------------------


@detector("TD408", depth=Depth.LINT)
class NonBlockingWithoutPinMemory(LintRule):
    """``batch.to(device, non_blocking=True)`` in a loop over a loader that does not pin."""

    requires = ("non_blocking",)

    def leave_loop(self, loop: Loop) -> None:
        node = loop.node
        if not isinstance(node, (ast.For, ast.AsyncFor)):
            return
        ctx = self.ctx
        loader = loader_of(ctx, node.iter, loop.function)
        if loader is None:
            return
        pin = loader_arguments(loader).get("pin_memory")
        if not _is_false(pin):
            return
        derived = _batch_names(loop)
        fix = self._fix(loader, pin)
        for item in loop.items:
            call = item.node
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and \
                    _non_blocking(call) and _from_batch(call.func.value, derived):
                self._report(call, loader, fix)

    def _fix(self, loader: ast.Call, pin: ast.expr | None) -> Fix:
        ctx = self.ctx
        edit = ctx.replace(pin, "True") if pin is not None else insert_keywords(
            ctx, loader, "pin_memory=True")
        return Fix("Pin the loader's batches: `pin_memory=True`", (edit,), Applicability.UNSAFE)

    def _report(self, call: ast.Call, loader: ast.Call, fix: Fix) -> None:
        moved = self.ctx.segment(call)
        moved = moved if len(moved) <= 60 and "\n" not in moved else "the batch"
        self.report(
            call,
            f"`{moved}` at line {call.lineno} asks for an asynchronous copy, but the batch "
            f"comes from the DataLoader at line {loader.lineno}, which does not pin memory: "
            "from pageable memory the copy is staged through a pinned buffer by the CPU and "
            "does not overlap with compute",
            fix_hint="Pass `pin_memory=True` to the DataLoader, or drop `non_blocking=True`.",
            fix=fix,
        )


def _non_blocking(call: ast.Call) -> bool:
    func = call.func
    if not isinstance(func, ast.Attribute) or func.attr not in ("to", "cuda"):
        return False
    flag = next((k.value for k in call.keywords if k.arg == "non_blocking"), None)
    if flag is None and func.attr == "cuda" and len(call.args) == 2:
        flag = call.args[1]
    return isinstance(flag, ast.Constant) and flag.value is True


def _from_batch(receiver: ast.expr, derived: set[str]) -> bool:
    """Whether a moved value comes from the batch (and was not pinned by hand)."""
    node = receiver
    while True:
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Attribute) and node.func.attr == "pin_memory":
                return False
            node = node.func.value if isinstance(node.func, ast.Attribute) else node.func
        elif isinstance(node, (ast.Subscript, ast.Attribute)):
            node = node.value
        else:
            return isinstance(node, ast.Name) and node.id in derived


def _batch_names(loop: Loop) -> set[str]:
    """Names holding the batch or parts of it: the loop target and what is unpacked from it."""
    assert isinstance(loop.node, (ast.For, ast.AsyncFor))
    derived = {n.id for n in ast.walk(loop.node.target) if isinstance(n, ast.Name)}
    for item in loop.items:
        node = item.node
        if isinstance(node, ast.Assign) and any(
                isinstance(n, ast.Name) and n.id in derived for n in ast.walk(node.value)):
            for target in node.targets:
                derived |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
    for node in ast.walk(loop.node):
        if isinstance(node, ast.comprehension) and any(
                isinstance(n, ast.Name) and n.id in derived for n in ast.walk(node.iter)):
            derived |= {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
    return derived
