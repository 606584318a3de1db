"""Saving checkpoints from a distributed program: TD804 checkpoint-saved-on-every-rank,
TD805 ddp-prefixed-state-dict."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator
from typing import cast

from torchdoctor.findings import Applicability, Depth, Finding, Fix, Severity
from torchdoctor.rules.detectors import detector
from torchdoctor.static.analysis.callers import (
    called_function,
    spawned_function,
    switched_off_by_every_call,
)
from torchdoctor.static.analysis.calls import last_name, values_assigned
from torchdoctor.static.analysis.dataloader import iterated, loader_of
from torchdoctor.static.analysis.entries import item_assignments
from torchdoctor.static.analysis.events import MAX_CALL_DEPTH, helper_to_follow
from torchdoctor.static.analysis.loops import (
    element_pairs,
    enclosing_loops,
    guard_between,
    names_bound_in,
)
from torchdoctor.static.analysis.prefix_handling import (
    project_checkpoint_load,
    project_prefix_handling,
)
from torchdoctor.static.analysis.ranks import (
    Resolve,
    is_rank_nonzero,
    is_rank_zero,
    names_rank,
    resolver,
    returns_rank_zero,
    runs_on_rank_zero_only,
    true_on_rank_zero_only,
)
from torchdoctor.static.analysis.related_files import imported_sources, program_sources
from torchdoctor.static.bindings import BindingKind
from torchdoctor.static.context import FileContext, Scope
from torchdoctor.static.names import is_none
from torchdoctor.static.rules.base import LintRule
from torchdoctor.static.structure import Frame, FrameKind, FunctionScope, Item
from torchdoctor.static.torchapi import (
    MULTI_PROCESS_CALLS,
    MULTI_PROCESS_CLASS_NAMES,
    MULTI_PROCESS_CLASSES,
    WRAPPER_NAMES,
    name_tokens,
)

# A distributed call of the file: what it calls, the call, where it is, its function.
_DistributedCall = tuple[str, ast.Call, tuple[Frame, ...], FunctionScope | None]


@detector("TD804", depth=Depth.LINT)
class CheckpointSavedOnEveryRank(LintRule):
    """``torch.save`` in a distributed program with no rank-0 guard on the way to it."""

    requires = ("save",)
    call_names = frozenset({"save"}) | MULTI_PROCESS_CLASS_NAMES | MULTI_PROCESS_CALLS

    def __init__(self, ctx: FileContext, sink: Callable[[Finding], None]) -> None:
        super().__init__(ctx, sink)
        self._saves: list[tuple[ast.Call, tuple[Frame, ...]]] = []
        self._distributed: list[_DistributedCall] = []

    def visit_call(self, node: ast.Call) -> None:
        name = self.ctx.qualified_name(node.func)
        if name == "torch.save":
            self._saves.append((node, self.ctx.frames))
        elif name is not None and (
            name in MULTI_PROCESS_CLASSES
            or (
                name.startswith("torch.distributed.")
                and name.rpartition(".")[2] in MULTI_PROCESS_CALLS
            )
        ):
            called = name.rpartition(".")[2]
            self._distributed.append((called, node, self.ctx.frames, self.ctx.function))

    def _proves_processes(self, distributed: list[_DistributedCall]) -> bool:
        """Whether these distributed calls show a program of several processes."""
        ctx = self.ctx
        if not distributed:
            return False
        if all(entry[0] in _QUERIES for entry in distributed):
            # `torch.distributed.get_world_size() if args.local_rank != -1 else 1` in a
            # log line left from a template: proof only where the program starts processes
            return _program_sets_up_processes(ctx)
        singles = {
            id(call)
            for called, call, *_ in distributed
            if called == "init_process_group" and _one_process(ctx, call)
        }
        # `init_process_group(world_size=1, ...)` alone: a group of one process
        return not singles or any(
            called not in _QUERIES and id(call) not in singles for called, call, *_ in distributed
        )

    def leave_module(self, module: object) -> None:
        ctx = self.ctx
        if not self._saves or not self._proves_processes(self._distributed):
            return
        # a sampler built only under a flag no call sets (`DistributedSampler(ds) if
        # distributed else None`, every call leaving `distributed=False`) proves nothing
        distributed = [
            entry
            for entry in self._distributed
            if not switched_off_by_every_call(ctx, entry[2], entry[1])
        ]
        if not self._proves_processes(distributed):
            return
        callers = _Callers(ctx)
        reachable = callers.reachable_from_module()
        if not any(function is None or function in reachable for *_, function in distributed):
            return  # the distributed code is not part of what this file runs
        for call, frames in self._saves:
            scope = ctx.function_of(frames)
            path = (
                call.args[1]
                if len(call.args) > 1
                else next((k.value for k in call.keywords if k.arg == "f"), None)
            )
            if path is None or _per_rank_or_in_memory(ctx, path, scope):
                continue
            if _named_after_loaded_items(ctx, path, scope, frames):
                continue
            if not callers.guarded(frames, call.lineno, 0):
                self._report(call)

    def _report(self, call: ast.Call) -> None:
        self.report(
            call,
            f"`torch.save(...)` at line {call.lineno} runs on every rank of this distributed "
            "program: nothing around it, or around the calls that reach it, checks for "
            "rank 0, so every process writes the same checkpoint file at once (N times the "
            "I/O, and a reader can meet a file that another rank is still writing)",
            fix_hint="Save from one process: wrap the save in `if dist.get_rank() == 0:` and "
            "call `dist.barrier()` after it, before any rank reads the file.",
        )


# Distributed calls that only ask about a process group some other code set up.
_QUERIES = frozenset({"get_rank", "get_world_size"})
# What sets up a multi-process run, as a program's text spells it (its own or a helper's).
_SETS_UP_PROCESSES = re.compile(
    rb"init_process_group|DistributedDataParallel|DistributedSampler|FullyShardedDataParallel"
    rb"|fully_shard|Accelerator\(|deepspeed|horovod|hvd\.init|Fabric\(|init_dist"
    rb"|torch\.distributed\.launch|torchrun|mp\.spawn|multiprocessing\.spawn"
)


def _one_process(ctx: FileContext, call: ast.Call) -> bool:
    """``init_process_group(..., world_size=1)``: the literal 1, or ``<name>.world_size``
    where every binding of ``<name>``, in the file or in the project module it is
    imported from, is an ``argparse.Namespace(...)`` given ``world_size=1``
    (SwissArmyTransformer's weight-conversion scripts and their ``config/*_config.py``)."""
    given = next((k.value for k in call.keywords if k.arg == "world_size"), None)
    if given is None:
        given = call.args[3] if len(call.args) > 3 else None
    if isinstance(given, ast.Constant):
        return given.value == 1
    if not (
        isinstance(given, ast.Attribute)
        and given.attr == "world_size"
        and isinstance(given.value, ast.Name)
    ):
        return False
    name = given.value.id
    verdict = _namespace_of_one(ctx.tree, name)
    if verdict is not None:
        return verdict
    for _, data in imported_sources(ctx):
        if name.encode() not in data:
            continue
        try:
            verdict = _namespace_of_one(ast.parse(data), name)
        except (SyntaxError, ValueError):
            continue
        if verdict is not None:
            return verdict
    return False


def _namespace_of_one(tree: ast.Module, name: str) -> bool | None:
    """Whether every binding of ``name`` in ``tree`` (in any branch or function) is a
    ``Namespace(...)`` with ``world_size=1``; ``None`` when none binds it."""
    bindings = values_assigned(tree, name)
    if not bindings:
        return None
    return all(
        isinstance(value, ast.Call)
        and last_name(value.func) == "Namespace"
        and any(
            k.arg == "world_size" and isinstance(k.value, ast.Constant) and k.value.value == 1
            for k in value.keywords
        )
        for value in bindings
    )


def _program_sets_up_processes(ctx: FileContext) -> bool:
    """Whether some file of the program (the file, its folder line, the modules it
    imports) starts or wraps a multi-process run."""
    key = ("TD804", "sets-up-processes")
    if key not in ctx.memo:
        own = ctx.source.encode("utf-8", "replace")
        ctx.memo[key] = bool(_SETS_UP_PROCESSES.search(own)) or any(
            _SETS_UP_PROCESSES.search(data) for _, data in program_sources(ctx)
        )
    return bool(ctx.memo[key])


class _Callers:
    """Whether every way to a place passes a rank-0 check, following local calls."""

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self._sites: dict[FunctionScope, list[tuple[ast.Call, tuple[Frame, ...]]]] | None = None

    def guarded(self, frames: tuple[Frame, ...], line: int, depth: int) -> bool:
        ctx = self.ctx
        function = ctx.function_of(frames)
        tests = _RankTests(ctx, function)
        if (
            guard_between(
                frames,
                None,
                lambda node, in_body: (
                    tests.zero(node.test) or tests.single_process(node.test, in_body)
                    if in_body
                    else tests.nonzero(node.test) or tests.single_process(node.test, in_body)
                ),
            )
            is not None
        ):
            return True
        if _exits_early_off_rank_zero(ctx, function, frames, line):
            return True
        if function is None:
            return False
        if any(
            is_rank_zero(decorator) or runs_on_rank_zero_only(ctx, decorator, function)
            for decorator in function.node.decorator_list
        ):
            return True
        sites = self.sites().get(function, [])
        if not sites or depth >= MAX_CALL_DEPTH:
            return True  # no visible caller: a helper whose callers decide
        return all(self.guarded(site_frames, site.lineno, depth + 1) for site, site_frames in sites)

    def reachable_from_module(self) -> set[FunctionScope]:
        """Functions that module-level code (the main guard included) runs: the ones it
        calls, and the helpers they call, followed like every analysis follows them."""
        ctx = self.ctx
        found: set[FunctionScope] = set()
        ids: set[int] = set()
        # Module code is where the program starts, not a body read into: the functions it
        # calls are entered at depth -1, so their own calls are followed MAX_CALL_DEPTH deep.
        frontier: list[FunctionScope | None] = [None]
        for depth in range(-1, MAX_CALL_DEPTH):
            following: list[FunctionScope | None] = []
            for scope in frontier:
                items = scope.items if scope is not None else ctx.module.items
                for item in items:
                    if isinstance(item.node, ast.Call):
                        called = helper_to_follow(ctx, item.node, scope, depth, ids, instances=True)
                        if called is None:
                            spawned = spawned_function(ctx, item.node, scope)
                            called = spawned if spawned and id(spawned) not in ids else None
                        if called is not None:
                            found.add(called)
                            ids.add(id(called))
                            following.append(called)
            frontier = following
        return found

    def sites(self) -> dict[FunctionScope, list[tuple[ast.Call, tuple[Frame, ...]]]]:
        """The file's call sites of each of its functions (``obj.f()`` on an instance of a
        local class included): :meth:`guarded` climbs them, MAX_CALL_DEPTH callers up."""
        if self._sites is None:
            ctx = self.ctx
            self._sites = {}
            scopes: list[FunctionScope | None] = [None, *ctx.module.functions]
            for scope in scopes:
                items = scope.items if scope is not None else ctx.module.items
                for item in items:
                    if isinstance(item.node, ast.Call):
                        # a spawned function counts as called there: for what the
                        # program reaches and for the guards around the way there
                        called = called_function(ctx, item.node, scope) or spawned_function(
                            ctx, item.node, scope
                        )
                        if called is not None and called is not scope:
                            self._sites.setdefault(called, []).append((item.node, item.frames))
        return self._sites


class _RankTests:
    """Rank checks read through what names mean: a flag bound to one (``args.save_logs =
    args.logs and is_master(args)``), a local function returning one (``def
    should_write(rank): return rank == 0``), a flag bound to such a call."""

    def __init__(self, ctx: FileContext, scope: Scope, depth: int = 0) -> None:
        self.ctx = ctx
        self.scope = scope
        self.depth = depth
        self.resolve = resolver(ctx, scope)

    def zero(self, test: ast.expr) -> bool:
        """``test`` holds only on rank 0."""
        if is_rank_zero(test, self.resolve):
            return True
        if self.depth >= MAX_CALL_DEPTH:
            return False
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
            return any(self.zero(value) for value in test.values)
        if _tests_not_none(test) and self._only_rank_zero_gets(cast("ast.Compare", test).left):
            return True  # NeWCRFs: `if eval_measures is not None:`, rank 0's result only
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            return self.nonzero(test.operand)
        deeper = _RankTests(self.ctx, self.scope, self.depth + 1)
        bound = self.resolve(test) if isinstance(test, (ast.Name, ast.Attribute)) else None
        if bound is None and isinstance(test, ast.Attribute):
            bound = _assigned_attribute(self.ctx, self.scope, test)
            if bound is None and true_on_rank_zero_only(self.ctx, test.attr):
                return True  # `if opt.log:`, set true on rank 0 by another module
        if bound is not None and deeper.zero(bound):
            return True
        if isinstance(test, ast.Name) and self._set_true_on_rank_zero_only(test.id):
            return True  # ViLBERT: `default_gpu = False`, True under `rank == 0` or alone
        if bound is not None:
            return False
        function = (
            helper_to_follow(self.ctx, test, self.scope, self.depth, ())
            if isinstance(test, ast.Call)
            else None
        )
        if function is None:
            # ANCE's `is_first_worker()`, a rank test of another module of the project
            return isinstance(test, ast.Call) and returns_rank_zero(self.ctx, test, self.scope)
        returned = [
            node.value
            for node in ast.walk(function.node)
            if isinstance(node, ast.Return) and node.value is not None
        ]
        inside = _RankTests(self.ctx, function, self.depth + 1)
        return bool(returned) and all(inside.zero(value) for value in returned)

    def _only_rank_zero_gets(self, value: ast.expr) -> bool:
        """``value`` is a name bound to a call of a function of the file that returns
        something other than ``None`` only inside a rank-zero branch (NeWCRFs'
        ``online_eval`` returns its measures under ``if not distributed or gpu == 0:`` and
        ``None`` after it): the name is not ``None`` on rank 0 only."""
        bound = self.resolve(value) if isinstance(value, ast.Name) else None
        if not isinstance(bound, ast.Call):
            return False
        function = helper_to_follow(self.ctx, bound, self.scope, self.depth, ())
        if function is None:
            return False
        inside = _RankTests(self.ctx, function, self.depth + 1)
        answered = [
            item
            for item in function.items
            if isinstance(item.node, ast.Return)
            and item.node.value is not None
            and not is_none(item.node.value)
        ]
        return bool(answered) and all(
            guard_between(
                item.frames, None, lambda node, in_body: in_body and inside.zero(node.test)
            )
            is not None
            for item in answered
        )

    def _set_true_on_rank_zero_only(self, name: str) -> bool:
        """Every assignment of the flag ``name`` in its scope sets it false, or sets it true
        in a branch that runs only on rank 0 or only in a single process (``if rank == 0:
        default_gpu = True``, ``else: default_gpu = True`` of ``if distributed:``), and
        one sets it true."""
        if self.depth >= MAX_CALL_DEPTH:
            return False  # `if flag: flag = True` would ask about the flag again
        deeper = _RankTests(self.ctx, self.scope, self.depth + 1)
        root: ast.AST = self.scope.node if self.scope is not None else self.ctx.tree
        parents = {id(c): n for n in ast.walk(root) for c in ast.iter_child_nodes(n)}
        true_sets = 0
        for node in ast.walk(root):
            if not (
                isinstance(node, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
            ):
                continue
            if isinstance(node.value, ast.Constant) and not node.value.value:
                continue  # `default_gpu = False`
            if not (isinstance(node.value, ast.Constant) and node.value.value is True):
                return False
            branch = parents.get(id(node))
            if not (
                isinstance(branch, ast.If)
                and (
                    (node in branch.body and deeper.zero(branch.test))
                    or deeper.single_process(branch.test, node in branch.body)
                )
            ):
                return False
            true_sets += 1
        return true_sets > 0

    def single_process(self, test: ast.expr, in_body: bool) -> bool:
        """The branch runs only when the program is not distributed: the ``else`` of
        ``if args.distributed:``, ``if world_size > 1:``, ``if dist.is_initialized():``,
        or the body of the same tests negated (SwinMM saves its final model under a
        rank-0 check when distributed and plainly in the ``else``)."""
        negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
        if negated:
            test = cast("ast.UnaryOp", test).operand
        return in_body == negated and _says_distributed(test, self.resolve)

    def nonzero(self, test: ast.expr) -> bool:
        """``test`` holds only off rank 0."""
        if is_rank_nonzero(test, self.resolve):
            return True
        return (
            isinstance(test, ast.UnaryOp)
            and isinstance(test.op, ast.Not)
            and self.depth < MAX_CALL_DEPTH
            and _RankTests(self.ctx, self.scope, self.depth + 1).zero(test.operand)
        )


def _tests_not_none(test: ast.expr) -> bool:
    """``x is not None``."""
    return (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.IsNot)
        and is_none(test.comparators[0])
    )


def _says_distributed(test: ast.expr, resolve: Callable[[ast.expr], ast.expr | None]) -> bool:
    """``args.distributed``, ``use_ddp``, ``dist.is_initialized()``, ``world_size > 1``
    (a flag bound to one of those too): true exactly when several processes run."""
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        left, op, right = test.left, test.ops[0], test.comparators[0]
        if (  # `args.local_rank != -1`: launched one process per GPU
            isinstance(op, ast.NotEq)
            and isinstance(right, ast.UnaryOp)
            and isinstance(right.op, ast.USub)
            and isinstance(right.operand, ast.Constant)
            and right.operand.value == 1
            and names_rank(left)
        ):
            return True
        return (
            isinstance(op, (ast.Gt, ast.NotEq))
            and isinstance(right, ast.Constant)
            and right.value == 1
            and "world" in name_tokens(last_name(left) or "")
        )
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        # `dist.is_available() and args.local_rank != -1`
        return any(_says_distributed(v, resolve) for v in test.values) and all(
            _says_distributed(v, resolve) or _availability(v) for v in test.values
        )
    if isinstance(test, ast.Call):
        words = set(name_tokens(last_name(test.func) or ""))
        return "initialized" in words and (last_name(test.func) or "").startswith("is_")
    if isinstance(test, (ast.Name, ast.Attribute)):
        words = set(name_tokens(last_name(test) or ""))
        if words & {"distributed", "ddp"} and not words & {"not", "non", "no"}:
            return True
        bound = resolve(test)
        return bound is not None and bound is not test and _says_distributed_once(bound)
    return False


def _availability(test: ast.expr) -> bool:
    """``dist.is_available()``: the build supports torch.distributed, nothing more."""
    return isinstance(test, ast.Call) and last_name(test.func) == "is_available"


def _says_distributed_once(value: ast.expr) -> bool:
    """:func:`_says_distributed` of a flag's value, without following names further."""
    return _says_distributed(value, lambda expr: None)


def _assigned_attribute(ctx: FileContext, scope: Scope, target: ast.Attribute) -> ast.expr | None:
    """The value of the one ``args.flag = value`` in the scope (an attribute of a parameter
    or a module-level object), when there is exactly one; else of the one in the whole
    file (``main()`` sets ``args.save_logs`` and hands ``args`` to the function that saves)."""
    wanted = ast.dump(target.value), target.attr

    def values_in(items: list[Item]) -> list[ast.expr]:
        return [
            item.node.value
            for item in items
            if isinstance(item.node, ast.Assign)
            for assigned in item.node.targets
            if isinstance(assigned, ast.Attribute)
            and (ast.dump(assigned.value), assigned.attr) == wanted
        ]

    values = values_in(scope.items if scope is not None else ctx.module.items)
    if not values:
        values = [v for _, items in ctx.module.bodies() for v in values_in(items)]
    return values[0] if len(values) == 1 else None


def _exits_early_off_rank_zero(
    ctx: FileContext, function: FunctionScope | None, frames: tuple[Frame, ...], line: int
) -> bool:
    """``if rank != 0: return`` (or ``continue`` in the same loop) before the place."""
    items = function.items if function is not None else ctx.module.items
    tests = _RankTests(ctx, function)
    for item in items:
        node = item.node
        if not isinstance(node, (ast.Return, ast.Continue, ast.Raise)) or item.line >= line:
            continue
        if isinstance(node, ast.Continue):
            loop = next((f for f in reversed(item.frames) if f.kind is FrameKind.LOOP), None)
            if loop is None or loop not in frames:
                continue
        guard = guard_between(
            item.frames,
            None,
            lambda n, body: tests.nonzero(n.test) if body else tests.zero(n.test),
        )
        if guard is not None and not any(f.node is guard for f in frames):
            return True
    return False


def _per_rank_or_in_memory(ctx: FileContext, path: ast.expr, scope: Scope) -> bool:
    """A file name that includes the rank (each rank saves its own shard), or a buffer."""
    resolve = resolver(ctx, scope)
    for value in _path_parts(path, resolve):
        if isinstance(value, ast.Call) and ctx.is_call_to(value, "io.BytesIO", scope=scope):
            return True
        for node in ast.walk(value):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and "rank" in node.value.lower()
            ):
                return True
            if isinstance(node, (ast.Name, ast.Attribute, ast.Call)) and names_rank(node):
                return True
    return False


def _named_after_loaded_items(
    ctx: FileContext, path: ast.expr, scope: Scope, frames: tuple[Frame, ...]
) -> bool:
    """A file name made from what a loop over a data loader yields (``image_path`` of
    each batch, or of a loop over the batch's paths): one file per sample, and a loader
    of a distributed program hands each rank its own samples, so no two ranks write the
    same file. The step counter of ``enumerate(loader)`` is the same on every rank and
    does not count."""
    loops = [loop for loop in enclosing_loops(ctx, frames) if isinstance(loop.node, ast.For)]
    if not loops:
        return False
    per_sample: set[str] = set()
    for loop in reversed(loops):  # outermost first: an inner loop may walk a batch
        node = cast("ast.For", loop.node)
        for iterable, element in element_pairs(node.target, node.iter) or [
            (node.iter, node.target)
        ]:
            if _is_a_loader(ctx, iterable, scope) or per_sample & _names_read(iterable):
                per_sample |= names_bound_in(element)
    if not per_sample:
        return False
    resolve = resolver(ctx, scope)
    return any(per_sample & _names_read(value) for value in _path_parts(path, resolve))


def _names_read(expr: ast.expr) -> set[str]:
    return {node.id for node in ast.walk(expr) if isinstance(node, ast.Name)}


def _is_a_loader(ctx: FileContext, iterable: ast.expr, scope: Scope) -> bool:
    """A ``DataLoader`` the file builds, or a name or attribute called a loader
    (``accelerator.prepare`` hands one back under the name it had)."""
    if loader_of(ctx, iterable, scope) is not None:
        return True
    source = iterated(ctx, iterable, scope)
    return isinstance(source, (ast.Name, ast.Attribute)) and "loader" in name_tokens(
        last_name(source)
    )


# How many assignments deep a path's names are followed: `shard = f"{rank}.pt"` joined
# into the path is one; `name = f"opt.{suffix}"` with `suffix = f"{rank:05d}"` is two.
_PATH_BINDING_DEPTH = 2


def _path_parts(path: ast.expr, resolve: Resolve) -> Iterator[ast.expr]:
    """The path, then the values its names were bound to, two assignments deep: a rank
    can sit in a file name held in a variable and joined into the path (LlamaGen's
    ``os.path.join(folder, opt_state_fn)`` with ``opt_state_fn =
    f"optimizer.{dist.get_rank():05d}-of-..."``), an f-string part or ``folder / name``."""
    frontier = [path]
    for depth in range(_PATH_BINDING_DEPTH + 1):
        yield from frontier
        if depth == _PATH_BINDING_DEPTH:
            return
        bound = (resolve(name) for value in frontier for name in _named_pieces(value))
        frontier = [value for value in bound if value is not None]


def _named_pieces(expr: ast.expr) -> Iterator[ast.expr]:
    """The names and attributes whose text goes into a path: the parts of an f-string,
    of ``a / b`` or ``a + b``, the arguments of ``os.path.join(...)`` and the receiver of
    ``folder.joinpath(...)``; not the object an attribute is read from (``cfg`` of
    ``cfg.out_dir``) nor a function called, whose bindings say nothing of the file name."""
    if isinstance(expr, (ast.Name, ast.Attribute)):
        yield expr
    elif isinstance(expr, ast.Call):
        if isinstance(expr.func, ast.Attribute):
            yield from _named_pieces(expr.func.value)
        for argument in [*expr.args, *(keyword.value for keyword in expr.keywords)]:
            yield from _named_pieces(argument)
    else:
        for child in ast.iter_child_nodes(expr):
            if isinstance(child, ast.expr):
                yield from _named_pieces(child)


@detector("TD805", depth=Depth.LINT)
class DdpPrefixedStateDict(LintRule):
    """``torch.save`` of ``ddp_model.state_dict()``: every key starts with ``module.``."""

    requires = ("DataParallel", "DDP")
    call_names = frozenset({"save"})

    def __init__(self, ctx: FileContext, sink: Callable[[Finding], None]) -> None:
        super().__init__(ctx, sink)
        self._saves: list[tuple[ast.Call, tuple[Frame, ...]]] = []

    def visit_call(self, node: ast.Call) -> None:
        if self.ctx.is_call_to(node, "torch.save"):
            self._saves.append((node, self.ctx.frames))

    def leave_module(self, module: object) -> None:
        ctx = self.ctx
        for save, frames in self._saves:
            scope = ctx.function_of(frames)
            saved = (
                save.args[0]
                if save.args
                else next((k.value for k in save.keywords if k.arg == "obj"), None)
            )
            if saved is None or self._loads_into_a_wrapper(scope):
                continue
            for state_call in _state_dict_calls(ctx, saved, scope):
                receiver = state_call.func.value  # type: ignore[attr-defined]
                wrapper = WRAPPER_NAMES.get(ctx.instance_type(receiver, scope) or "")
                if wrapper is not None and _in_unwrapped_branch(
                    scope.node if scope is not None else ctx.tree, state_call, ctx.segment(receiver)
                ):
                    continue  # `if hasattr(model, "module"): ... else: model.state_dict()`
                if wrapper is not None and _bound_where_unwrapped(
                    scope.node if scope is not None else ctx.tree, receiver
                ):
                    continue  # `if parallel: m = model.module` / `else: m = model`
                if wrapper is not None and self._saved_where_never_wrapped(receiver, frames, scope):
                    continue  # `if args.distributed: ... else: torch.save(model.state_dict())`
                if wrapper is not None:
                    several = self._multi_device_only(receiver, scope)
                    reloaded = self._file_loads_into_a_wrapper()
                    handled = None if reloaded else project_prefix_handling(ctx)
                    unread = not reloaded and handled is None and not project_checkpoint_load(ctx)
                    self._report(
                        state_call, receiver, wrapper, save, several, reloaded, handled, unread
                    )

    def _file_loads_into_a_wrapper(self) -> bool:
        """Another function of the file, or its module level, loads a state_dict into a
        wrapped model (the script's own resume): its checkpoints round-trip between
        wrappers, so the prefix breaks only a load this project does not make."""
        bodies = self.ctx.module.bodies()
        return any(self._loads_into_a_wrapper(body) for body, _ in bodies)

    def _saved_where_never_wrapped(
        self, receiver: ast.expr, frames: tuple[Frame, ...], scope: Scope
    ) -> bool:
        """The save runs only in a single process (the ``else`` of ``if
        args.distributed:``), and every wrap of the model sits under a test that asks for
        several processes (``if args.distributed: model = DDP(model)``): there
        the model was never wrapped, so its keys carry no prefix (MONAI's Swin UNETR
        pre-training saves under rank 0 when distributed and plainly in the ``else``)."""
        tests = _RankTests(self.ctx, scope)
        single = guard_between(
            frames, None, lambda node, in_body: tests.single_process(node.test, in_body)
        )
        if single is None:
            return False
        # Only a test of the process count: a wrap under `device_count() > 1` is
        # DataParallel's, which a single process runs too.
        return (
            self._wrap_tests(receiver, scope, lambda test: _says_distributed(test, tests.resolve))
            is not None
        )

    def _multi_device_only(self, receiver: ast.expr, scope: Scope) -> ast.expr | None:
        """The device-count test (``if world_size > 1:``) every wrap of ``receiver``'s name
        sits under (in its function for a local name, in the file for an attribute), if
        all of them do: the prefix then appears only on runs with several devices."""
        return self._wrap_tests(receiver, scope, counts_several_devices)

    def _wrap_tests(
        self, receiver: ast.expr, scope: Scope, accept: Callable[[ast.expr], bool]
    ) -> ast.expr | None:
        """The first of the tests that every wrap of ``receiver``'s name sits under, when
        each wrap sits in the body of an ``if`` whose test ``accept`` takes."""
        ctx = self.ctx
        local = isinstance(receiver, ast.Name)
        if (
            isinstance(receiver, ast.Name)
            and scope is not None
            and receiver.id not in names_bound_in(scope.node)
            and receiver.id not in scope.parameter_names
        ):
            scope = None  # a global the function only reads: wrapped at module level
        assigns = [
            (body, item, item.node)
            for body, items in ctx.module.bodies()
            if not local or body is scope
            for item in items
            if isinstance(item.node, ast.Assign)
        ]
        # The receiver's name, and the names it is assigned from (`self.model = model`).
        names = {ctx.segment(receiver)}
        names |= {
            node.value.id
            for _, _, node in assigns
            if isinstance(node.value, ast.Name)
            and any(ctx.segment(t) in names for t in node.targets)
        }
        tests: list[ast.expr] = []
        for body, item, node in assigns:
            if (
                isinstance(node.value, ast.Call)
                and any(ctx.segment(t) in names for t in node.targets)
                and ctx.instance_type(node.value, body) in WRAPPER_NAMES
            ):
                test = _guarding_test(item.frames, accept)
                if test is None:
                    return None
                tests.append(test)
        return tests[0] if tests else None

    def _loads_into_a_wrapper(self, scope: Scope) -> bool:
        """The same function loads a state_dict back into a DDP model: a consistent round
        trip between wrappers, not a checkpoint meant for a plain model."""
        ctx = self.ctx
        items = scope.items if scope is not None else ctx.module.items
        for item in items:
            call = item.node
            if not isinstance(call, ast.Call):
                continue
            if (
                isinstance(call.func, ast.Attribute)
                and call.func.attr == "load_state_dict"
                and ctx.instance_type(call.func.value, scope) in WRAPPER_NAMES
            ):
                return True
            # A project loader handed the wrapped model: `copy_state_dict(model, ckpt)`,
            # `load_checkpoint(model, path)`.
            words = set(name_tokens(last_name(call.func) or ""))
            if (words & {"load", "restore"} or {"copy", "state"} <= words) and any(
                ctx.instance_type(argument, scope) in WRAPPER_NAMES for argument in call.args
            ):
                return True
        return False

    def _report(
        self,
        state_call: ast.Call,
        receiver: ast.expr,
        wrapper: str,
        save: ast.Call,
        multi_device: ast.expr | None,
        reloaded: bool = False,
        handled: tuple[str, int] | None = None,
        unread: bool = False,
    ) -> None:
        ctx = self.ctx
        text = ctx.segment(receiver)
        fix = Fix(
            f"Save `{text}.module.state_dict()`",
            (ctx.replace(receiver, f"{text}.module"),),
            Applicability.UNSAFE,
        )
        when = ""
        if multi_device is not None:
            # Wrapped only when several devices are used: the checkpoint's format then
            # depends on the device count, which a maintainer may well accept.
            when = (
                f" when `{ctx.segment(multi_device)}` (line {multi_device.lineno}), the only "
                "case where the model is wrapped"
            )
        self.report(
            state_call,
            f"`{text}.state_dict()` at line {state_call.lineno} is the state of the "
            f"{wrapper} wrapper, so every key of the checkpoint saved at line {save.lineno} "
            f"starts with `module.`{when}: a plain model loads it only after the prefix is "
            "stripped, and `load_state_dict(..., strict=False)` silently loads nothing"
            + ("; this file loads its checkpoints back into a wrapped model" if reloaded else "")
            + (
                f"; the project handles the prefix where it loads ({handled[0]}:{handled[1]})"
                if handled is not None
                else ""
            )
            + (
                "; nothing in the project loads a checkpoint back (no `torch.load` or "
                "`load_state_dict` in this file, its folder line or the modules it imports), "
                "so no load of its own breaks"
                if unread
                else ""
            ),
            fix_hint=f"Save the wrapped model's own state: `{text}.module.state_dict()`.",
            fix=fix,
            severity=(
                Severity.INFO
                if multi_device is not None or reloaded or handled is not None or unread
                else None
            ),
        )


# Names of a device or process count: `ngpu`, `n_gpus`, `world_size`, `num_devices`.
_COUNT_WORDS = ("gpu", "world_size", "device", "nproc", "num_proc")


def _guarding_test(
    frames: tuple[Frame, ...], accept: Callable[[ast.expr], bool]
) -> ast.expr | None:
    """The innermost ``if`` test around a statement, in whose body it sits, that
    ``accept`` takes (one that asks for several devices, or processes)."""
    for frame in reversed(frames):
        if frame.kind is FrameKind.IF_BODY:
            test = cast("ast.If", frame.node).test
            if accept(test):
                return test
    return None


def counts_several_devices(test: ast.expr) -> bool:
    """``test`` asks for more than one device: ``ngpu > 1``, ``world_size >= 2``,
    ``torch.cuda.device_count() > 1``, ``len(args.gpus) > 1``."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return False
    left, op, right = test.left, test.ops[0], test.comparators[0]
    if isinstance(op, (ast.Lt, ast.LtE)):
        left, right = right, left
        op = ast.Gt() if isinstance(op, ast.Lt) else ast.GtE()
    several = (isinstance(op, ast.Gt) and _is_int(right, 1)) or (
        isinstance(op, ast.GtE) and _is_int(right, 2)
    )
    return several and _names_a_count(left)


def _is_int(node: ast.expr, value: int) -> bool:
    return isinstance(node, ast.Constant) and node.value == value and type(node.value) is int


def _names_a_count(node: ast.expr) -> bool:
    if isinstance(node, ast.Call):
        if isinstance(node.func, ast.Name) and node.func.id == "len" and node.args:
            return _names_a_count(node.args[0])
        node = node.func
    word = node.id if isinstance(node, ast.Name) else getattr(node, "attr", "")
    return any(w in word.lower() for w in _COUNT_WORDS)


def _in_unwrapped_branch(root: ast.AST, call: ast.expr, receiver: str) -> bool:
    """Whether ``call`` runs only where ``receiver`` is not wrapped: in the ``else`` of
    ``if hasattr(receiver, "module"):``, ``if isinstance(receiver, DataParallel):`` or
    ``if is_parallel(receiver):`` (a statement or a conditional expression), or the body
    of the same tests negated; or in the branch of any test whose other branch reaches
    through ``receiver.module`` (``if ddp_bool: save(model.module.state_dict()) else:
    save(model.state_dict())``, ``m.module.state_dict() if world_size > 1 else
    m.state_dict()``): the author splits wrapped from plain there, whatever the test."""
    for node in ast.walk(root):
        if not isinstance(node, (ast.If, ast.IfExp)):
            continue
        if _other_branch_unwraps(node, call, receiver):
            return True
        test, negated = node.test, False
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            test, negated = test.operand, True
        if not _tests_wrapping(test, receiver):
            continue
        branch = node.body if negated else node.orelse
        places = branch if isinstance(branch, list) else [branch]
        if any(call is sub for place in places for sub in ast.walk(place)):
            return True
    return False


def _bound_where_unwrapped(root: ast.AST, receiver: ast.expr) -> bool:
    """``receiver`` is a name every binding of which in ``root`` either reads
    ``.module`` or sits in the branch of a test whose other branch does (few-shot-meta-
    baseline's ``if parallel: model_ = model.module`` / ``else: model_ = model``, or
    ``model_ = model.module if parallel else model``): the author split wrapped from
    plain when naming the model, so its state carries no prefix."""
    if not isinstance(receiver, ast.Name):
        return False
    values: list[ast.expr] = []
    for node in ast.walk(root):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == receiver.id for t in node.targets
        ):
            value = node.value
            values += [value.body, value.orelse] if isinstance(value, ast.IfExp) else [value]
    unwrapped = [v for v in values if isinstance(v, ast.Attribute) and v.attr == "module"]
    plain = [v for v in values if v not in unwrapped]
    return bool(unwrapped) and all(
        isinstance(v, ast.Name) and _in_unwrapped_branch(root, v, v.id) for v in plain
    )


def _other_branch_unwraps(node: ast.If | ast.IfExp, call: ast.expr, receiver: str) -> bool:
    """Whether ``call`` lies in one branch of ``node`` and the other reads
    ``receiver.module``."""
    branches = [node.body, node.orelse]
    places = [branch if isinstance(branch, list) else [branch] for branch in branches]
    holds = [any(call is sub for place in group for sub in ast.walk(place)) for group in places]
    if holds.count(True) != 1:
        return False
    other = places[holds.index(False)]
    return any(
        isinstance(sub, ast.Attribute)
        and sub.attr == "module"
        and ast.unparse(sub.value) == receiver
        for place in other
        for sub in ast.walk(place)
    )


def _tests_wrapping(test: ast.expr, receiver: str) -> bool:
    """``hasattr(receiver, "module")``, ``isinstance(receiver, <a DDP or DataParallel
    class>)`` (by name: ``nn.DataParallel``, ``DDP``, a tuple of them), or a helper named
    for the question asked of ``receiver`` alone (``is_parallel(model)``,
    ``utils.is_ddp(model)``)."""
    if (
        isinstance(test, ast.Call)
        and len(test.args) == 1
        and not test.keywords
        and ast.unparse(test.args[0]) == receiver
    ):
        words = set(name_tokens(last_name(test.func) or ""))
        return bool(words & _WRAPPER_WORDS) and not words & {"not", "un", "de"}
    if not (
        isinstance(test, ast.Call)
        and isinstance(test.func, ast.Name)
        and len(test.args) == 2
        and ast.unparse(test.args[0]) == receiver
    ):
        return False
    second = test.args[1]
    if test.func.id == "hasattr":
        return isinstance(second, ast.Constant) and second.value == "module"
    if test.func.id != "isinstance":
        return False
    classes = second.elts if isinstance(second, ast.Tuple) else [second]
    return bool(classes) and all(
        (last_name(c) or "") in _WRAPPER_CLASS_NAMES for c in classes if isinstance(c, ast.expr)
    )


# Words of a helper that asks whether a model is wrapped (`is_parallel`, `is_ddp`).
_WRAPPER_WORDS = frozenset({"parallel", "ddp", "dp", "wrapped", "distributed"})

_WRAPPER_CLASS_NAMES = frozenset(
    {"DataParallel", "DistributedDataParallel", "DDP", "DP", "NativeDDP", "ApexDDP"}
)


def _state_dict_calls(
    ctx: FileContext, expr: ast.expr, scope: Scope, depth: int = 0
) -> Iterator[ast.Call]:
    """``x.state_dict()`` calls in a saved expression, through names bound to them, dict
    literals and ``ckpt["model"] = ...`` assignments earlier in the scope."""
    for node in ast.walk(expr):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "state_dict"
        ):
            yield node
        elif isinstance(node, ast.Name) and depth < 2:
            binding = ctx.binding(node, scope)
            if binding is not None and binding.kind is BindingKind.ASSIGN and binding.value:
                yield from _state_dict_calls(ctx, binding.value, scope, depth + 1)
            for _, value in item_assignments(ctx, node.id, scope):
                yield from _state_dict_calls(ctx, value, scope, depth + 1)
