"""What goes wrong around a ``DistributedDataParallel`` wrap, seen in one file.

TD806 loader-without-distributed-sampler (every rank trains on the same batches), TD807
forward-bypasses-ddp-wrapper (``ddp_model.module(x)`` or the unwrapped model called in
training: no gradient all-reduce, the ranks drift apart), TD808
parameters-cast-after-ddp-wrap (``model.half()`` after the wrap: DDP's buckets still point
at the old parameters).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from torchdoctor.findings import Depth
from torchdoctor.rules.detectors import detector
from torchdoctor.static import torchapi
from torchdoctor.static.analysis.callers import constant_arguments, passed_values, ruled_out
from torchdoctor.static.analysis.calls import keyword
from torchdoctor.static.analysis.dataloader import assigned_name, iterated, loader_calls, loader_of
from torchdoctor.static.analysis.step_sequences import Body, Kind, sequences
from torchdoctor.static.branches import block_lines
from torchdoctor.static.context import FileContext, Scope
from torchdoctor.static.grad_mode import grad_disabled_by
from torchdoctor.static.names import is_none
from torchdoctor.static.rules.base import LintRule
from torchdoctor.static.structure import FrameKind, Item, ModuleScope
from torchdoctor.static.values import bound_value, constructor_of

_DDP = torchapi.DDP
_LOADER = torchapi.DATALOADER
_CASTS = frozenset({"half", "double", "float", "bfloat16"})
_DTYPES = torchapi.FLOAT_DTYPES
_SHARDED = ("rank", "world", "shard", "split_dataset_by_node", "num_replicas")


@dataclass(frozen=True, slots=True)
class Wrap:
    """One ``wrapper = DDP(model, ...)`` (``wrapped`` is empty when the model is built in
    the call itself)."""

    item: Item
    scope: Scope
    wrapped: str
    wrapper: str
    module: ast.expr | None = None

    @property
    def line(self) -> int:
        """The line of the wrap."""
        return self.item.line


def wraps(ctx: FileContext) -> list[Wrap]:
    """Every ``x = DistributedDataParallel(model, ...)`` of the file. Cached."""
    key = ("ddp", "wraps")
    cached = ctx.memo.get(key)
    if cached is None:
        found = []
        for scope, items in ctx.module.bodies():
            for item in items:
                node = item.node
                if (
                    isinstance(node, ast.Assign)
                    and len(node.targets) == 1
                    and isinstance(node.value, ast.Call)
                    and ctx.is_call_to(node.value, _DDP, scope=scope)
                ):
                    call = node.value
                    module = (
                        call.args[0]
                        if call.args
                        else next((k.value for k in call.keywords if k.arg == "module"), None)
                    )
                    module = None if module is None else _unchained(module)
                    wrapped = (
                        ctx.segment(module) if isinstance(module, (ast.Name, ast.Attribute)) else ""
                    )
                    found.append(Wrap(item, scope, wrapped, ctx.segment(node.targets[0]), module))
        cached = ctx.memo[key] = found
    return cached  # type: ignore[return-value]


def _unchained(expr: ast.expr) -> ast.expr:
    while (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Attribute)
        and expr.func.attr in ("to", "cuda")
    ):
        expr = expr.func.value
    return expr


def _on_the_other_side_of_every_wrap(ctx: FileContext, call: ast.Call) -> bool:
    """Every DDP wrap of the file sits in the body of an ``if T:`` (with or without an
    ``else``) and ``call`` in the ``else`` of an ``if T:`` or the body of an ``if not T:``
    (NeuralRecon's ``if cfg.DISTRIBUTED:`` around the DistributedSampler loader and the
    wrap, a plain loader in the ``else``; TransFuser's ``if parallel == True:`` wrap with
    no ``else``): the loader feeds the single-process run."""
    found = wraps(ctx)
    if not found:
        return False
    # Per test text: the line ranges run when it holds, and those run when it does not.
    tests: dict[str, tuple[list[range], list[range]]] = {}
    for node in ast.walk(ctx.tree):
        if not isinstance(node, ast.If):
            continue
        test, negated = node.test, False
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            test, negated = test.operand, True
        holds, fails = tests.setdefault(ast.unparse(test), ([], []))
        (fails if negated else holds).append(block_lines(node.body))
        if node.orelse:
            (holds if negated else fails).append(block_lines(node.orelse))
    for wrap in found:
        if not any(
            any(wrap.line in body for body in holds)
            and any(call.lineno in other for other in fails)
            for holds, fails in tests.values()
        ):
            return False
    return True


def _training_after(ctx: FileContext, scope: Scope, line: int) -> bool:
    """Whether a backward() runs after ``line`` in ``scope`` (directly or in a helper)."""
    for body in sequences(ctx):
        if body.scope is scope and any(
            a.kind is Kind.BACKWARD and a.site.line > line for a in body.actions
        ):
            return True
    return False


def _returns_after(item: Item) -> bool:
    """Whether a branch around ``item`` in its function returns after it (``if
    args.evaluate: validate(model); return``): the training later in the function does
    not follow this call."""
    for frame in reversed(item.frames):
        if frame.kind is FrameKind.FUNCTION:
            return False
        if frame.kind in (FrameKind.IF_BODY, FrameKind.IF_ELSE):
            block = getattr(frame.node, "body" if frame.kind is FrameKind.IF_BODY else "orelse")
            if any(isinstance(s, ast.Return) and s.lineno > item.line for s in block):
                return True
    return False


def _feeds_backward(ctx: FileContext, item: Item, scope: Scope, body: Body) -> bool:
    """Whether the value ``item`` assigns is what a later ``backward()`` of the body runs
    on: its name is read by the loss the backward's target is bound to (two steps)."""
    node = item.node
    statement = next(
        (
            i.node
            for i in body.items
            if isinstance(i.node, ast.Assign)
            and i.line == item.line
            and any(n is node for n in ast.walk(i.node.value))
        ),
        None,
    )
    if not (
        isinstance(statement, ast.Assign)
        and len(statement.targets) == 1
        and isinstance(statement.targets[0], ast.Name)
    ):
        return False
    produced = statement.targets[0].id
    for action in body.actions:
        if action.kind is not Kind.BACKWARD or action.site.line <= item.line:
            continue
        pending: list[ast.expr] = [action.target] if action.target is not None else []
        for _ in range(3):
            reads = {n.id for e in pending for n in ast.walk(e) if isinstance(n, ast.Name)}
            if produced in reads:
                return True
            bound = [
                bound_value(ctx, n, scope)
                for e in pending
                for n in ast.walk(e)
                if isinstance(n, ast.Name)
            ]
            pending = [b[0] for b in bound if b is not None]
    return False


def _loop_trains_around(ctx: FileContext, scope: Scope, item: Item) -> bool:
    """Whether a loop around ``item`` in ``scope`` runs a backward() (so training goes on
    after ``item`` on the loop's next pass)."""
    loops = {id(frame.node) for frame in item.frames if frame.kind is FrameKind.LOOP}
    return any(
        body.scope is scope
        and body.loop is not None
        and id(body.loop.node) in loops
        and any(a.kind is Kind.BACKWARD for a in body.actions)
        for body in sequences(ctx)
    )


@detector("TD808", depth=Depth.LINT)
class CastAfterWrap(LintRule):
    """``model.half()`` / ``model.to(torch.float16)`` after the DDP wrap, before training."""

    requires = ("DistributedDataParallel",)
    needs_structure = True

    def leave_module(self, module: ModuleScope) -> None:
        ctx = self.ctx
        for wrap in wraps(ctx):
            items = wrap.scope.items if wrap.scope is not None else module.items
            names = {wrap.wrapped, wrap.wrapper, f"{wrap.wrapper}.module"} - {""}
            for item in items:
                node = item.node
                if item.line <= wrap.line or not isinstance(node, ast.Call):
                    continue
                if (
                    not isinstance(node.func, ast.Attribute)
                    or ctx.segment(node.func.value) not in names
                    or not self._casts(node)
                ):
                    self._in_helper(node, item, wrap, names)
                    continue
                if _training_after(ctx, wrap.scope, item.line) and not _returns_after(item):
                    self._report(node, wrap)

    def _in_helper(self, call: ast.Call, item: Item, wrap: Wrap, names: set[str]) -> None:
        """The wrapped model handed to a helper of the file that casts it
        (``save_half_checkpoint(ddp_model)`` running ``model.half()``), with training
        after the call (later in the scope, or on the next pass of a loop around it)."""
        ctx = self.ctx
        helper = ctx.resolve_local_call(call, wrap.scope)
        if helper is None or helper is wrap.scope:
            return
        params = {
            name
            for name in [*helper.positional_names(call), *(k.arg for k in call.keywords if k.arg)]
            if (passed := helper.argument_for(call, name)) is not None
            and ctx.segment(passed) in names
        }
        if not params:
            return
        inside = params | {f"{p}.module" for p in params}
        constants = constant_arguments(call, helper)  # `validate(model, half=False)`
        for sub in helper.items:
            node = sub.node
            if (
                isinstance(node, ast.Call)
                and not ruled_out(sub, helper, constants)
                and isinstance(node.func, ast.Attribute)
                and ctx.segment(node.func.value) in inside
                and self._casts(node)
                and (
                    (_training_after(ctx, wrap.scope, item.line) and not _returns_after(item))
                    or _loop_trains_around(ctx, wrap.scope, item)
                )
            ):
                self._report(node, wrap, f" (in `{helper.name}()`, called at line {item.line})")
                return

    def _casts(self, call: ast.Call) -> bool:
        func = call.func
        assert isinstance(func, ast.Attribute)
        if func.attr in _CASTS:
            return not call.args and not call.keywords
        if func.attr != "to":
            return False
        values = [*call.args, *(k.value for k in call.keywords if k.arg == "dtype")]
        return any(self.ctx.qualified_name(v) in _DTYPES for v in values)

    def _report(self, call: ast.Call, wrap: Wrap, through: str = "") -> None:
        ctx = self.ctx
        self.report(
            call,
            f"`{ctx.segment(call)}` at line {call.lineno}{through} casts the model after it was "
            f"wrapped in DistributedDataParallel at line {wrap.line}: DDP registered its "
            "gradient hooks and buckets on the parameters as they were, so gradients of the "
            "cast parameters are not all-reduced as expected (errors, or ranks that drift "
            "apart)",
            fix_hint=f"Cast `{wrap.wrapped}` before wrapping it: `{wrap.wrapped}` = "
            f"`{wrap.wrapped}.half()` (or use autocast), then `DDP({wrap.wrapped})`.",
            evidence={"wrap_line": wrap.line},
        )


@detector("TD807", depth=Depth.LINT)
class ForwardBypassesWrapper(LintRule):
    """The training forward goes through ``ddp.module`` or the unwrapped model."""

    requires = ("DistributedDataParallel",)
    needs_structure = True

    def leave_module(self, module: ModuleScope) -> None:
        ctx = self.ctx
        all_wraps = wraps(ctx)
        if not all_wraps:
            return
        reported: set[int] = set()
        for body in sequences(ctx):
            backwards = [a.site.line for a in body.actions if a.kind is Kind.BACKWARD]
            if not backwards:
                continue
            for item in body.items:
                node = item.node
                if not isinstance(node, ast.Call) or id(node) in reported:
                    continue
                if body.loop is None and item.line > max(backwards):
                    continue
                wrap = self._bypass(node, item, body.scope, all_wraps, body)
                if wrap is not None and grad_disabled_by(ctx, item.frames) is None:
                    reported.add(id(node))
                    self._report(node, wrap)
                elif wrap is None and grad_disabled_by(ctx, item.frames) is None:
                    self._in_helper(node, item, body.scope, all_wraps, reported)

    def _in_helper(
        self, call: ast.Call, site: Item, scope: Scope, all_wraps: list[Wrap], reported: set[int]
    ) -> None:
        """A loss or regulariser helper called in training that runs the unwrapped model
        (``def consistency(x): return model(x)...`` with ``model`` wrapped by then)."""
        ctx = self.ctx
        helper = ctx.resolve_local_call(call, scope)
        if helper is None or helper is scope:
            return
        for wrap in all_wraps:
            if wrap.scope is not scope or site.line <= wrap.line or not wrap.wrapped:
                continue
            for inner in helper.items:
                node = inner.node
                if (
                    not isinstance(node, ast.Call)
                    or id(node) in reported
                    or grad_disabled_by(ctx, inner.frames) is not None
                ):
                    continue
                func = node.func
                text = ctx.segment(func)
                bypass = text == f"{wrap.wrapper}.module" or (
                    text == wrap.wrapped != wrap.wrapper and self._same_object(func, helper, wrap)
                )
                if bypass:
                    reported.add(id(node))
                    self._report(node, wrap)

    def _bypass(
        self, call: ast.Call, item: Item, scope: Scope, all_wraps: list[Wrap], body: Body
    ) -> Wrap | None:
        ctx = self.ctx
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr == "forward":
            func = func.value
        if not isinstance(func, (ast.Name, ast.Attribute)):
            return None
        text = ctx.segment(func)
        for wrap in all_wraps:
            if text == f"{wrap.wrapper}.module":
                return wrap
            if (
                isinstance(func, ast.Attribute)
                and ctx.segment(func.value) == f"{wrap.wrapper}.module"
                and _feeds_backward(ctx, item, scope, body)
                and not self._wrapper_ran_before(item, body, wrap)
            ):
                return wrap  # `ddp.module.predict(x)` whose output the loss is built from
            if not wrap.wrapped or text != wrap.wrapped or wrap.wrapped == wrap.wrapper:
                continue
            if self._after(wrap, item, scope) and self._same_object(func, scope, wrap):
                return wrap
        return None

    def _wrapper_ran_before(self, item: Item, body: Body, wrap: Wrap) -> bool:
        """Whether the pass already went through the wrapper (``out = ddp(x)``) before
        ``ddp.module.<part>(...)`` runs: DDP prepared its reduction for this backward,
        and its hooks on every parameter all-reduce what the part's parameters get too
        (densecap's ``model.module.bce_loss(score, target)`` on the wrapper's outputs)."""
        ctx = self.ctx
        for earlier in body.items:
            node = earlier.node
            if earlier.line >= item.line or not isinstance(node, ast.Call):
                continue
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr == "forward":
                func = func.value
            if ctx.segment(func) == wrap.wrapper and grad_disabled_by(ctx, earlier.frames) is None:
                return True
        return False

    def _same_object(self, func: ast.expr, scope: Scope, wrap: Wrap) -> bool:
        """Whether a called name is still the object that was wrapped (``model =
        DDP(model)`` later rebinds it to a wrapper)."""
        if not isinstance(func, ast.Name) or not isinstance(wrap.module, ast.Name):
            return True
        now = self.ctx.lookup(func, scope)
        then = self.ctx.lookup(wrap.module, wrap.scope)
        if now is None or then is None or now[0].node is not then[0].node:
            return False
        value = now[0].value  # a wrapper wrapped again is still a wrapper
        return not (isinstance(value, ast.Call) and self.ctx.is_call_to(value, _DDP, scope=now[1]))

    @staticmethod
    def _after(wrap: Wrap, item: Item, scope: Scope) -> bool:
        """The call runs after the wrap: later in the same function, or (for ``self.x``
        wrapped in ``__init__``) in another method of the class."""
        if scope is wrap.scope:
            return item.line > wrap.line
        return (
            wrap.scope is not None
            and wrap.scope.name == "__init__"
            and scope is not None
            and scope.owner is wrap.scope.owner
            and wrap.wrapped.startswith(f"{scope.self_name}.")
        )

    def _report(self, call: ast.Call, wrap: Wrap) -> None:
        ctx = self.ctx
        self.report(
            call,
            f"`{ctx.segment(call)[:60]}` at line {call.lineno} runs the model around its "
            f"DistributedDataParallel wrapper `{wrap.wrapper}` (line {wrap.line}): DDP "
            "all-reduces gradients only for forwards that go through the wrapper, so each "
            "rank applies its own gradients and the replicas drift apart",
            fix_hint=f"Call the wrapper: `{wrap.wrapper}(...)` in training; keep "
            f"`{wrap.wrapper}.module` for saving and evaluation.",
            evidence={"wrap_line": wrap.line},
        )


# torch's iterable dataset, by the names a project's class may derive from it through.
_ITERABLE_BASES = ("torch.utils.data.IterableDataset", "torch.utils.data.dataset.IterableDataset")


@detector("TD806", depth=Depth.LINT)
class LoaderWithoutDistributedSampler(LintRule):
    """A training ``DataLoader`` without a sampler in a script that trains with DDP."""

    requires = ("DistributedDataParallel",)
    needs_structure = True

    def leave_module(self, module: ModuleScope) -> None:
        ctx = self.ctx
        if not wraps(ctx) or not any(
            name.startswith("torch.distributed") for name in ctx.imports.values()
        ):
            return
        training = self._training_loaders(module)
        for scope, items in module.bodies():
            for call in loader_calls(ctx, items, scope):
                if id(call) not in training and not self._named_for_training(items, call):
                    continue
                if self._has_sampler(call) or self._sharded(call, scope):
                    continue
                if _on_the_other_side_of_every_wrap(ctx, call):
                    continue  # `if cfg.DISTRIBUTED: ... DDP` / `else:` this loader
                self._report(call)

    def _training_loaders(self, module: ModuleScope) -> set[int]:
        ctx = self.ctx
        found = set()
        for body in sequences(ctx):
            loop = body.loop
            if loop is None or not isinstance(loop.node, (ast.For, ast.AsyncFor)):
                continue
            if any(a.kind is Kind.BACKWARD for a in body.actions):
                made = loader_of(ctx, loop.node.iter, loop.function)
                if made is not None:
                    found.add(id(made))
                source = iterated(ctx, loop.node.iter, loop.function)
                if isinstance(source, ast.Name):  # train(model, train_loader, ...)
                    for value, caller, _call in passed_values(ctx, source, loop.function):
                        made = constructor_of(ctx, value, caller)
                        if made is not None and ctx.is_call_to(made, _LOADER, scope=caller):
                            found.add(id(made))
        return found

    @staticmethod
    def _named_for_training(items: list[Item], call: ast.Call) -> bool:
        target = assigned_name(items, call)
        name = target.id if isinstance(target, ast.Name) else getattr(target, "attr", "")
        return "train" in torchapi.name_tokens(name)

    @staticmethod
    def _has_sampler(call: ast.Call) -> bool:
        if len(call.args) > 3 or any(isinstance(a, ast.Starred) for a in call.args):
            return True
        return any(k.arg in (None, "sampler", "batch_sampler") for k in call.keywords)

    def _sharded(self, call: ast.Call, scope: Scope) -> bool:
        """An iterable dataset, or one the code splits by rank itself."""
        ctx = self.ctx
        dataset = (
            call.args[0]
            if call.args
            else next((k.value for k in call.keywords if k.arg == "dataset"), None)
        )
        if dataset is None:
            return True
        batch_size = keyword(call, "batch_size")
        if batch_size is not None and is_none(batch_size.value):
            # Automatic batching off: the dataset yields whole batches, an iterable
            # pipeline that no sampler drives (WeNet's, WebDataset's), sharded inside it.
            return True
        texts = [ctx.segment(dataset)]
        if isinstance(dataset, ast.Name):
            found = ctx.lookup(dataset, scope)
            if found is None or found[0].value is None:
                return True  # a parameter or an unknown: the caller may have sharded it
            texts.append(ctx.segment(found[0].value))
        if any(word in text.lower() for text in texts for word in _SHARDED):
            return True
        type_name = ctx.instance_type(dataset, scope)
        if type_name is not None and type_name.startswith("<local>."):
            cls = ctx.local_class(type_name[len("<local>.") :])
            return cls is None or any("Iterable" in ctx.segment(b) for b in cls.node.bases)
        if type_name is None:
            return False
        # ANCE's StreamingDataset, an IterableDataset of another module of the project
        # that keeps every world_size-th element itself: no sampler drives an iterable
        project_class = ctx.project.module_class(type_name, near=ctx.path)
        if project_class is not None and any(map(project_class.subclasses, _ITERABLE_BASES)):
            return True
        return "Iterable" in type_name

    def _report(self, call: ast.Call) -> None:
        ctx = self.ctx
        self.report(
            call,
            f"`{ctx.segment(call.func)}(...)` at line {call.lineno} feeds DDP training but "
            "has no `DistributedSampler`: every rank iterates the whole dataset in the same "
            "order, so the ranks train on identical batches and N GPUs do the work of one",
            fix_hint="Pass `sampler=DistributedSampler(dataset)` (and call "
            "`sampler.set_epoch(epoch)` every epoch), without `shuffle=True`.",
        )
