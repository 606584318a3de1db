"""Distributed data rules: TD801 sampler-epoch-never-set, TD802 shuffle-with-sampler,
TD803 find-unused-parameters-cost.

The rules about saving checkpoints from a distributed program (TD804, TD805) live in
:mod:`.distributed_saving`.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass

from torchdoctor.findings import Applicability, Confidence, Depth, Finding, Fix
from torchdoctor.rules.detectors import detector
from torchdoctor.static import torchapi
from torchdoctor.static.analysis.callers import called_function, switched_off_by_every_call
from torchdoctor.static.analysis.calls import last_name
from torchdoctor.static.analysis.held_loaders import mentions, reaches_through_calls
from torchdoctor.static.analysis.loops import (
    enclosing_loops,
    function_trains,
    steps_every_iteration,
    trains,
)
from torchdoctor.static.bindings import BindingKind
from torchdoctor.static.context import FileContext, Scope
from torchdoctor.static.rules.base import LintRule
from torchdoctor.static.structure import Frame, FrameKind, FunctionScope, Loop
from torchdoctor.static.torchapi import DDP, DISTRIBUTED_SAMPLER

# Callees that hand find_unused_parameters to DDP: DDP itself under any alias,
# Lightning's DDPStrategy, Accelerate's DistributedDataParallelKwargs, Trainer(strategy=).
_DDP_CALLEES = ("DistributedDataParallel", "DDP", "Strategy", "Trainer", "Fabric")


@dataclass(frozen=True, slots=True)
class _Sampler:
    call: ast.Call
    frames: tuple[Frame, ...]


_Kept = tuple[str, FunctionScope | None]  # a variable, the function that binds it


@detector("TD801", depth=Depth.LINT)
class SamplerEpochNeverSet(LintRule):
    """A shuffling ``DistributedSampler`` iterated by an epoch loop of the same file, in a
    program that never calls ``set_epoch``."""

    requires = ("DistributedSampler",)
    needs_structure = True

    def __init__(self, ctx: FileContext, sink: Callable[[Finding], None]) -> None:
        super().__init__(ctx, sink)
        self._samplers: list[_Sampler] = []
        self._set_epoch: list[tuple[Frame, ...]] = []
        self._loaders: list[tuple[ast.Call, ast.expr]] = []  # DataLoader call, its sampler
        self._targets: dict[int, ast.expr] = {}
        self._either: set[int] = set()  # both branches of such an expression

    def visit_Assign(self, node: ast.Assign) -> None:
        if len(node.targets) == 1 and isinstance(node.targets[0], (ast.Name, ast.Attribute)):
            self._targets[id(node.value)] = node.targets[0]
            value = node.value
            if isinstance(value, ast.IfExp):
                # `sampler = DistributedSampler(ds) if distributed else None`: either
                # branch is what the name holds, the body under the expression's test
                self._targets[id(value.body)] = self._targets[id(value.orelse)] = node.targets[0]
                self._either.update((id(value.body), id(value.orelse)))

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "set_epoch":
            self._set_epoch.append(self.ctx.frames)
            return
        sampler = next(
            (k.value for k in node.keywords if k.arg in ("sampler", "batch_sampler")), None
        )
        if sampler is not None:
            self._loaders.append((node, sampler))
        type_name = (
            self.ctx.instance_type(node) if isinstance(func, (ast.Name, ast.Attribute)) else None
        )
        if type_name is not None and self.ctx.is_family(type_name, DISTRIBUTED_SAMPLER):
            self._samplers.append(_Sampler(node, self.ctx.frames))

    def leave_module(self, module: object) -> None:
        for sampler in self._samplers:
            if _shuffle_off(sampler.call) or self._epoch_is_set(sampler):
                continue
            if self._turned_off_by_every_caller(sampler):
                continue  # Uni-Mol: every call passes shuffle=False or distributed=False
            names = self._names_of(sampler.call)
            if self._handed_with_its_loader(sampler, names):
                continue
            epoch_loop = self._epoch_loop(sampler, names)
            confidence = Confidence.HIGH
            if epoch_loop is None and not self._set_epoch and self._escapes(sampler, names):
                if self._only_evaluated_where_kept(sampler):
                    continue  # pythae: get_eval_dataloader()'s loader, iterated by eval_step()
                epoch_loop = self._any_epoch_loop()
                confidence = Confidence.MEDIUM
            if epoch_loop is not None and not _evaluated_only(self.ctx, epoch_loop, names):
                self._report(sampler, epoch_loop, names, confidence)

    def _epoch_is_set(self, sampler: _Sampler) -> bool:
        """A ``set_epoch`` call that can run every epoch: in a loop, or in a function other
        than the one that builds the sampler (called from the epoch loop, presumably)."""
        own = self.ctx.function_of(sampler.frames)
        return any(
            any(f.kind is FrameKind.LOOP for f in frames) or self.ctx.function_of(frames) is not own
            for frames in self._set_epoch
        )

    def _turned_off_by_every_caller(self, sampler: _Sampler) -> bool:
        """The sampler is built in a function whose parameters decide it (an ``if
        distributed:`` around it, the ``else`` of ``if sequential:``, ``shuffle=shuffle``
        in it), and every call of that function the project shows passes, or defaults
        to, a constant that turns the guard or the shuffle off: no call gets a shuffling
        DistributedSampler."""
        return switched_off_by_every_call(
            self.ctx, sampler.frames, sampler.call, switch=_shuffle_argument(sampler.call)
        )

    def _handed_with_its_loader(self, sampler: _Sampler, names: list[str]) -> bool:
        """The sampler is passed to a call together with a loader built on it
        (``infinite_dataloader(make_loader(..., sampler=s), sampler=s)``, trlX): a helper
        given both iterates the loader and sets the sampler's epoch itself (it has no
        other use for the sampler). Only for helpers lint cannot read: a function of
        this file shows whether it calls ``set_epoch``."""
        ctx = self.ctx
        if not names:
            return False
        sampler_name = names[0]
        loaders = set(names[1:])
        own = ctx.function_of(sampler.frames)
        body = ctx.tree if own is None or sampler_name.startswith("self.") else own.node
        for node in ast.walk(body):
            if not isinstance(node, ast.Call):
                continue
            arguments = [*node.args, *(k.value for k in node.keywords)]
            if not any(ctx.segment(a) == sampler_name for a in arguments):
                continue
            if ctx.resolve_local_call(node, own) is not None:
                continue  # a function of this file: its set_epoch calls are already seen
            if any(
                ctx.segment(a) in loaders
                or any(
                    isinstance(inner, ast.Call)
                    and any(
                        k.arg in ("sampler", "batch_sampler")
                        and ctx.segment(k.value) == sampler_name
                        for k in inner.keywords
                    )
                    for inner in ast.walk(a)
                )
                for a in arguments
            ):
                return True
        return False

    def _names_of(self, call: ast.Call) -> list[str]:
        """The variables holding the sampler, then those holding loaders built on it."""
        ctx = self.ctx
        target = self._targets.get(id(call))
        names = [ctx.segment(target)] if target is not None else []
        for loader, argument in self._loaders:
            if argument is call or (names and ctx.segment(argument) == names[0]):
                held = self._targets.get(id(loader))
                if held is not None:
                    names.append(ctx.segment(held))
        return names

    def _epoch_loop(self, sampler: _Sampler, names: list[str]) -> Loop | None:
        """A loop that trains without being the step loop itself (an epoch loop) and uses
        the sampler or its loader: itself, in the sampler's function (or class, for
        ``self.x``), or through the methods and helpers it calls
        (:func:`~torchdoctor.static.analysis.held_loaders.reaches_through_calls`)."""
        ctx = self.ctx
        if not names:
            return None
        own = ctx.function_of(sampler.frames)
        owner = own.owner if own is not None else None
        followed = None
        for loop in ctx.module.all_loops:
            if steps_every_iteration(ctx, loop):
                continue
            near = loop.function is own or (
                owner is not None
                and loop.function is not None
                and loop.function.owner is owner
                and any(n.startswith("self.") for n in names)
            )
            if near and mentions(loop.node, names) and trains(ctx, loop):
                return loop
            # reaching the loader's training loop through calls is training too
            if followed is None and reaches_through_calls(ctx, loop, own, names):
                followed = loop
        return followed

    def _escapes(self, sampler: _Sampler, names: list[str]) -> bool:
        """The sampler (or its loader) is returned by a function that the file calls: a
        loader factory, whose result the epoch loop iterates under another name."""
        ctx = self.ctx
        function = ctx.function_of(sampler.frames)
        if function is None:
            return False
        returned = any(
            isinstance(item.node, ast.Return)
            and item.node.value is not None
            and any(
                node is sampler.call or (isinstance(node, ast.Name) and node.id in names)
                for node in ast.walk(item.node.value)
            )
            for item in function.items
        )
        return returned and any(
            isinstance(item.node, ast.Call) and ctx.resolve_local_call(item.node, scope) is function
            for scope in [None, *ctx.module.functions]
            for item in (scope.items if scope is not None else ctx.module.items)
        )

    def _only_evaluated_where_kept(self, sampler: _Sampler) -> bool:
        """The loader factory's result, followed to the variables that keep it
        (:meth:`_kept_in`), is iterated by the file only to evaluate: at least one loop
        over it, or a function of the file given it that loops, and not one step of
        training where it is drawn (pythae's ``get_eval_dataloader()``, whose loader
        only ``eval_step()`` iterates, under ``torch.no_grad()``). The epoch loop of a
        factory's sampler is a guess (any loop of the file that trains); what the file
        shows of the loader outweighs it. A call the file cannot read (a callback
        handed the loader) is evidence neither way."""
        ctx = self.ctx
        factory = ctx.function_of(sampler.frames)
        kept = self._kept_in(factory) if factory is not None else []
        if not kept:
            return False
        evaluated = False
        for loop in ctx.module.all_loops:
            node = loop.node
            if isinstance(node, ast.While) or not mentions(node.iter, _seen(kept, loop.function)):
                continue
            if trains(ctx, loop):
                return False
            evaluated = True
        for scope, items in ctx.module.bodies():
            names = _seen(kept, scope)
            for item in items if names else ():
                call = item.node
                if not isinstance(call, ast.Call) or not any(
                    mentions(a, names) for a in [*call.args, *(k.value for k in call.keywords)]
                ):
                    continue
                if isinstance(call.func, ast.Name) and call.func.id in ("iter", "next"):
                    # draws its batches right here, in whatever loop is around
                    if any(trains(ctx, loop) for loop in enclosing_loops(ctx, item.frames)):
                        return False
                    continue
                called = called_function(ctx, call, scope)
                if called is not None and function_trains(ctx, called):
                    return False
                evaluated = evaluated or (called is not None and bool(called.loops))
        return evaluated

    def _kept_in(self, factory: FunctionScope) -> list[_Kept]:
        """The variables that keep what ``factory`` returns: the one each call of it in the
        file is assigned to (``eval_loader = self.get_eval_dataloader(ds)``), then any
        assigned from those (``self.eval_loader = eval_loader``). Empty when a call's
        result goes anywhere else (``Trainer(make_loader(ds))``): it cannot be followed."""
        ctx = self.ctx
        kept: list[_Kept] = []
        for scope, item in ctx.callers(factory):
            target = self._targets.get(id(item.node))
            if target is None:
                return []
            kept.append((ctx.segment(target), scope))
        copies = [
            (ctx.segment(item.node.value), ctx.segment(item.node.targets[0]), scope)
            for scope, items in ctx.module.bodies()
            for item in items
            if isinstance(item.node, ast.Assign)
            and len(item.node.targets) == 1
            and isinstance(item.node.targets[0], (ast.Name, ast.Attribute))
            and isinstance(item.node.value, (ast.Name, ast.Attribute))
        ]
        grown = True
        while grown:
            grown = False
            for source, copy, scope in copies:
                if source in _seen(kept, scope) and copy not in _seen(kept, scope):
                    kept.append((copy, scope))
                    grown = True
        return kept

    def _any_epoch_loop(self) -> Loop | None:
        ctx = self.ctx
        return next(
            (
                loop
                for loop in ctx.module.all_loops
                if not steps_every_iteration(ctx, loop) and trains(ctx, loop)
            ),
            None,
        )

    def _report(
        self, sampler: _Sampler, epoch_loop: Loop, names: list[str], confidence: Confidence
    ) -> None:
        name = (
            names[0]
            if self._targets.get(id(sampler.call)) is not None
            else (f"{names[0]}.sampler" if names else "loader.sampler")
        )
        if epoch_loop.function is not self.ctx.function_of(sampler.frames):
            # the epoch loop is in another method: name what it can reach, ``self.x``
            held = [n for n in names if n.startswith("self.")]
            if held and not name.startswith("self."):
                name = held[0] if held[0] == names[0] else f"{held[0]}.sampler"
        self.report(
            sampler.call,
            f"The DistributedSampler built at line {sampler.call.lineno} shuffles, but "
            f"`set_epoch()` is never called in the epoch loop at line {epoch_loop.line}: it "
            "seeds its shuffle with `seed + epoch`, so every epoch replays the order of "
            "epoch 0 on every rank",
            fix_hint=f"Call `{name}.set_epoch(epoch)` at the top of the epoch loop, before "
            "the DataLoader is iterated.",
            evidence={"epoch_loop_line": epoch_loop.line},
            confidence=confidence,
            fix=self._fix(sampler, epoch_loop, name) if confidence is Confidence.HIGH else None,
        )

    def _fix(self, sampler: _Sampler, loop: Loop, name: str) -> Fix | None:
        node = loop.node
        if (
            isinstance(node, ast.While)
            or not isinstance(node.target, ast.Name)
            or loop.function is not self.ctx.function_of(sampler.frames)
            or loop.line < sampler.call.lineno
            or id(sampler.call) in self._either  # the name may hold None or another sampler
        ):
            return None
        edit = self.ctx.insert_before_statement(node.body[0], f"{name}.set_epoch({node.target.id})")
        return Fix(
            f"Call `{name}.set_epoch({node.target.id})` at the top of the epoch loop",
            (edit,),
            Applicability.UNSAFE,
        )


def _seen(kept: list[_Kept], scope: FunctionScope | None) -> list[str]:
    """The variables of ``kept`` that code in ``scope`` refers to: ``self.x`` in the
    methods of the class that binds it, a plain name in its own function (anywhere,
    when bound at module level)."""
    seen = []
    for name, bound_in in kept:
        if name.startswith("self."):
            owner = bound_in.owner if bound_in is not None else None
            visible = owner is not None and scope is not None and scope.owner is owner
        else:
            visible = bound_in is None or scope is bound_in
        if visible:
            seen.append(name)
    return seen


# Builtins that read a loader without drawing its batches for training.
_NEUTRAL_READERS = frozenset({"len", "enumerate", "iter", "print", "isinstance"})


def _evaluated_only(ctx: FileContext, loop: Loop, names: list[str]) -> bool:
    """Whether the epoch loop uses the sampler's loader only to evaluate: every use is a
    loop over it that takes no training step, or an argument of a function of the file
    that trains nothing (DeepSpeed-Chat's ``evaluation(model, eval_dataloader)``). The
    order of evaluation batches changes no result, so a sampler that never sees
    ``set_epoch`` there is harmless. Any other use (an unknown call, a rebinding) may
    train, and keeps the finding."""
    loops = {id(other.node): other for other in ctx.module.all_loops}
    handled: set[int] = set()
    uses = 0
    for node in ast.walk(loop.node):
        if id(node) in handled:
            continue
        if isinstance(node, (ast.For, ast.AsyncFor)) and node is not loop.node:
            if not mentions(node.iter, names):
                continue
            inner = loops.get(id(node))
            if inner is None or trains(ctx, inner):
                return False
            handled.update(id(n) for n in ast.walk(node.iter))
            uses += 1
        elif isinstance(node, ast.Call):
            arguments = [*node.args, *(k.value for k in node.keywords)]
            if not any(mentions(argument, names) for argument in arguments):
                continue
            if isinstance(node.func, ast.Name) and node.func.id in _NEUTRAL_READERS:
                # `len(loader)`: the bare name is read no further; a call among the
                # arguments (`print(evaluate(loader))`) is judged on its own
                handled.update(id(a) for a in arguments if isinstance(a, (ast.Name, ast.Attribute)))
                continue
            called = called_function(ctx, node, loop.function)
            if called is None or function_trains(ctx, called):
                return False
            handled.update(id(n) for n in ast.walk(node))
            uses += 1
        elif (
            isinstance(node, (ast.Name, ast.Attribute))
            and isinstance(node.ctx, ast.Load)
            and mentions(node, names)
        ):
            return False  # a use read no further: it may reach training
    return uses > 0


def _shuffle_off(call: ast.Call) -> bool:
    """``DistributedSampler(..., shuffle=False)``: the order is meant to stay fixed."""
    return _false(_shuffle_argument(call))


def _shuffle_argument(call: ast.Call) -> ast.expr | None:
    """What a ``DistributedSampler(...)`` call passes for ``shuffle``."""
    return next(
        (k.value for k in call.keywords if k.arg == "shuffle"),
        call.args[3] if len(call.args) > 3 else None,
    )


def _false(value: ast.expr | None) -> bool:
    """A constant that reads as false (``False``, ``0``, ``None``)."""
    return isinstance(value, ast.Constant) and not value.value


@detector("TD802", depth=Depth.LINT)
class ShuffleWithSampler(LintRule):
    """``DataLoader(shuffle=True, sampler=...)``: rejected by DataLoader whenever the
    sampler is not ``None``."""

    requires = ("shuffle", "DataLoader")

    def visit_Call(self, node: ast.Call) -> None:
        if len(node.args) <= 2:  # no positional shuffle: only a keyword can give one
            for keyword in node.keywords:
                if keyword.arg == "shuffle":
                    break
            else:
                return
        keywords = {k.arg: k for k in node.keywords if k.arg is not None}
        # DataLoader's own positions (dataset, batch_size, shuffle, sampler, batch_sampler)
        # say what a positional argument is only when the call builds a DataLoader; a
        # helper that returns one has parameters of its own.
        positions: bool | None = None
        if "shuffle" in keywords:
            shuffle: ast.expr | None = keywords["shuffle"].value
        else:
            shuffle = node.args[2] if len(node.args) > 2 else None
            if isinstance(shuffle, ast.Constant) and shuffle.value is True:
                positions = self._constructs_a_dataloader(node)
                shuffle = shuffle if positions else None
        if not (isinstance(shuffle, ast.Constant) and shuffle.value is True):
            return
        for argument, position in (("sampler", 3), ("batch_sampler", 4)):
            if argument in keywords:
                value: ast.expr | None = keywords[argument].value
            elif len(node.args) > position:
                if positions is None:
                    positions = self._constructs_a_dataloader(node)
                value = node.args[position] if positions else None
            else:
                value = None
            if value is not None and self._is_dataloader(node):
                presence = _presence(self.ctx, value, self.ctx.function)
                if presence is not None:
                    self._report(node, argument, value, shuffle, presence)
                    return

    def _is_dataloader(self, call: ast.Call) -> bool:
        type_name = self.ctx.instance_type(call)
        return type_name is not None and self.ctx.is_family(type_name, torchapi.DATALOADER)

    def _constructs_a_dataloader(self, call: ast.Call) -> bool:
        """The call is DataLoader's (or a subclass's) constructor itself, not a function
        that returns one."""
        ctx = self.ctx
        func = call.func
        callee = ctx.qualified_name(func)
        if callee is None and isinstance(func, ast.Name):
            if ctx.local_class(func.id) is not None:
                callee = f"<local>.{func.id}"
            else:
                callee = ctx.relative_imports.get(func.id)
        if callee is None or not ctx.is_family(callee, torchapi.DATALOADER):
            return False
        return ctx.project.function(callee, near=ctx.path) is None

    def _report(
        self,
        call: ast.Call,
        argument: str,
        value: ast.expr,
        shuffle: ast.expr,
        presence: Confidence,
    ) -> None:
        ctx = self.ctx
        text = ctx.segment(value)
        when = "always" if presence is Confidence.HIGH else "whenever it is not None"
        fix = None
        if (
            isinstance(value, (ast.Name, ast.Attribute))
            and any(k.value is shuffle for k in call.keywords)
            and ctx.is_call_to(call, torchapi.DATALOADER)
        ):
            fix = Fix(
                f"Shuffle only without a sampler: `shuffle=({text} is None)`",
                (ctx.replace(shuffle, f"({text} is None)"),),
                Applicability.SAFE,
            )
        self.report(
            call,
            f"`{ctx.segment(call.func)}(..., shuffle=True, {argument}={text})` at line "
            f'{call.lineno}: DataLoader raises "ValueError: {argument} option is mutually '
            f'exclusive with shuffle" when it gets a {argument} ({when} here), so the '
            "script dies at start-up exactly when it runs distributed",
            fix_hint=f"Let the {argument} decide the order: pass `shuffle=({text} is None)`, "
            f"or `shuffle=False` when there is always a {argument}.",
            confidence=Confidence.HIGH if presence is Confidence.HIGH else Confidence.MEDIUM,
            fix=fix,
        )


def _presence(ctx: FileContext, value: ast.expr, scope: Scope, depth: int = 0) -> Confidence | None:
    """Whether a sampler argument holds a sampler: ``HIGH`` always, ``MEDIUM`` sometimes
    (``x if cond else None``, a parameter defaulting to ``None``), ``None`` never."""
    if isinstance(value, ast.Constant):
        return None if value.value is None else Confidence.HIGH
    if isinstance(value, ast.IfExp):
        branches = [_presence(ctx, v, scope, depth + 1) for v in (value.body, value.orelse)]
        if all(b is None for b in branches):
            return None
        return Confidence.MEDIUM if None in branches else Confidence.HIGH
    if isinstance(value, ast.Name) and depth < 3:
        binding = ctx.binding(value, scope)
        if binding is None or binding.value is None:
            return (
                Confidence.HIGH
                if binding is None or binding.kind is not BindingKind.PARAMETER
                else Confidence.MEDIUM
            )
        if binding.kind is BindingKind.PARAMETER:
            return (
                Confidence.MEDIUM
                if _presence(ctx, binding.value, scope, depth + 1) is None
                else Confidence.HIGH
            )
        if binding.kind is BindingKind.ASSIGN:
            return _presence(ctx, binding.value, scope, depth + 1)
    return Confidence.HIGH


@detector("TD803", depth=Depth.LINT)
class FindUnusedParametersCost(LintRule):
    """``find_unused_parameters=True``: a graph traversal after every forward pass."""

    requires = ("find_unused_parameters",)

    def visit_Call(self, node: ast.Call) -> None:
        for keyword in node.keywords:
            value = keyword.value
            if (
                keyword.arg == "find_unused_parameters"
                and isinstance(value, ast.Constant)
                and value.value is True
            ):
                self._report(node, keyword.value, "`find_unused_parameters=True`")
            elif (
                keyword.arg == "strategy"
                and isinstance(value, ast.Constant)
                and value.value == "ddp_find_unused_parameters_true"
            ):
                self._report(node, keyword.value, f'`strategy="{value.value}"`')

    def _report(self, call: ast.Call, where: ast.expr, what: str) -> None:
        ctx = self.ctx
        name = ctx.qualified_name(call.func) or ""
        func = call.func
        last = name.rpartition(".")[2] or last_name(func)
        if not (name == DDP or any(word in last for word in _DDP_CALLEES)):
            return  # a test helper or config function that merely takes the flag
        known = name == DDP or name.endswith(".DDPStrategy")
        self.report(
            where,
            f"{what} in `{ctx.segment(call.func)}(...)` at line {call.lineno} makes DDP walk "
            "the autograd graph from the outputs after every forward pass to find "
            "parameters that will get no gradient; when every parameter is used, the walk "
            "is pure overhead (DDP then warns at run time that it found none)",
            fix_hint="Drop it if every parameter gets a gradient in every step; if the same "
            "parameters are always unused, pass `static_graph=True` instead.",
            confidence=Confidence.HIGH if known else Confidence.MEDIUM,
        )
