"""Train/eval mode rules: TD501 eval-in-train-mode, TD502 train-in-eval-mode.

Both run at the end of the module, when every function is known, because the mode is
often set one or two calls away from where the model runs (``model.eval()`` in ``main``,
the evaluation loop in ``evaluate``): they read each scope as the ordered
:class:`~torchdoctor.static.analysis.mode_actions.Action` s of
:func:`~torchdoctor.static.analysis.mode_actions.expand`.
"""

from __future__ import annotations

import ast
from typing import cast

from torchdoctor.findings import Applicability, Confidence, Depth, Fix, Severity
from torchdoctor.rules.detectors import detector
from torchdoctor.static import torchapi
from torchdoctor.static.analysis.calls import last_name, requires_grad_setting
from torchdoctor.static.analysis.mode_actions import (
    MODE,
    Action,
    arguments,
    exclusive_modes,
    expand,
    mapped,
    same_model,
)
from torchdoctor.static.analysis.mode_sensitivity import is_mode_sensitive, proven_mode_sensitive
from torchdoctor.static.analysis.optimized import covers, optimized_models
from torchdoctor.static.analysis.repeats import measures_a_repeated_step
from torchdoctor.static.branches import innermost_branch
from torchdoctor.static.context import FileContext
from torchdoctor.static.frameworks import framework_owned
from torchdoctor.static.grad_mode import grad_disabled_by
from torchdoctor.static.names import own_nodes, returns_of
from torchdoctor.static.rules.base import LintRule
from torchdoctor.static.structure import (
    ClassScope,
    FunctionScope,
    Item,
    Loop,
    ModuleScope,
)
from torchdoctor.static.training import EventKind, loop_events

_MAX_DEPTH = 3


@detector("TD501", depth=Depth.LINT)
class EvalInTrainMode(LintRule):
    """An evaluation loop (model called under no_grad, no backward) with no ``eval()``
    in reach: before it in its function, or before the call in the callers."""

    requires = ("no_grad", "inference_mode", "set_grad_enabled")

    def leave_module(self, module: ModuleScope) -> None:
        for loop in module.all_loops:
            self._check(loop)

    def _check(self, loop: Loop) -> None:
        ctx = self.ctx
        events = loop_events(ctx, loop)
        if any(e.kind in (EventKind.BACKWARD, EventKind.OPTIMIZER_STEP) for e in events):
            return
        # Only a model the code shows to have dropout or BatchNorm: a loss, a generator
        # or a callable of unknown kind called under no_grad is no evaluation to judge.
        forward = next(
            (
                e
                for e in events
                if e.kind is EventKind.FORWARD
                and loop.is_direct(e.item)
                and grad_disabled_by(ctx, e.item.frames) is not None
                and e.target is not None
                and proven_mode_sensitive(ctx, e.target, loop.function)
            ),
            None,
        )
        if forward is None or forward.target is None:
            return
        if any(e.kind in MODE and e.line <= forward.line for e in events):
            return
        model = ctx.segment(forward.target)
        state, where = self._mode_before(loop.function, loop.line, model, 0)
        if state in ("eval", "set"):
            return
        self._report(loop, forward.node, model, state, where, measures_a_repeated_step(ctx, loop))

    def _mode_before(
        self, scope: FunctionScope | None, line: int, model: str, depth: int
    ) -> tuple[str | None, str]:
        """The mode ``model`` is in at ``line`` of ``scope``: ``"eval"``, ``"train"``,
        ``"set"`` (a run-time flag), ``"no callers"``, or ``None`` (never set)."""
        ctx = self.ctx
        items = [i for i in (scope.items if scope else ctx.module.items) if i.line < line]
        names = {model} | _aliases(items, model) | _wrappers_of(ctx, scope, items, model)
        names |= _attribute_aliases(ctx, scope, model) | _held_model(ctx, scope, model)
        evaluated = max(
            _evaluating_method_call(ctx, items, names, scope),
            _run_by_a_library(ctx, items, names, scope),
        )
        trained_since = False
        for action in reversed(expand(ctx, items, scope)):
            if evaluated and evaluated > action.origin.line:
                return "set", f"line {evaluated}"
            if action.kind is EventKind.BACKWARD:
                trained_since = True
            elif action.kind is EventKind.EVAL and any(
                action.target.startswith(f"{n}.") for n in names if n
            ):
                # `reranker.model.eval()` before `reranker(x)`: the program sets the mode
                # of the parts it evaluates through (BLINK's cross-encoder wrapper)
                return "set", f"line {action.origin.line}"
            elif action.kind in MODE and any(same_model(action.target, n) for n in names):
                if action.kind is EventKind.TRAIN and not trained_since:
                    # train() right before a no_grad loop, with no training in between,
                    # is deliberate: BatchNorm recalibration, Monte Carlo dropout.
                    return "set", f"line {action.origin.line}"
                kind = {EventKind.EVAL: "eval", EventKind.TRAIN: "train"}.get(action.kind, "set")
                return kind, f"line {action.origin.line}"
        if evaluated:
            return "set", f"line {evaluated}"
        built = _built_in_eval(ctx, scope, model)
        if built is not None:
            return "eval", built
        if scope is None:
            return None, "the module"
        decorator = _eval_decorator(ctx.tree, scope)
        if decorator is not None and _owned_by(model, scope):
            return "eval", f"the `@{decorator}` decorator"
        callers = ctx.callers(scope)
        if not callers and scope.parent is not None and _free_in(scope, model):
            # a closure (GIT's `def gen_rows(): ... model(...)` after `model.eval()`):
            # it runs after its def, on the enclosing function's model
            return self._mode_before(scope.parent, scope.node.lineno, model, depth + 1)
        if not callers:
            if _owned_by(model, scope) and _method_of_a_module(ctx, scope):
                # generate(), beam_search() of the model itself: its users set its mode
                return "set", ""
            return "no callers", f"`{scope.name}()`"
        if depth >= _MAX_DEPTH:
            return "set", ""
        states = []
        for caller, item in callers:
            passed = mapped(model, arguments(ctx, item.node, scope, None))  # type: ignore[arg-type]
            states.append(self._mode_before(caller, item.line, passed, depth + 1))
        if all(state in ("eval", "set") for state, _ in states):
            return "eval", ""
        train = [where for state, where in states if state == "train"]
        return ("train", train[0]) if train else (None, f"`{scope.name}()` and its callers")

    def _report(
        self,
        loop: Loop,
        call: ast.AST,
        model: str,
        state: str | None,
        where: str,
        measured: bool = False,
    ) -> None:
        ctx = self.ctx
        if state == "train":
            why = f"`{model}` was put in training mode at {where}"
        elif state == "no callers":
            why = f"nothing in {where} calls `{model}.eval()` and no caller of it is in this file"
        else:
            why = f"`{model}.eval()` is never called before it in {where}"
        self.report(
            call,
            f"`{ctx.segment(call)}` at line {call.lineno} evaluates under "  # type: ignore[attr-defined]
            f"no_grad in the loop at line {loop.line}, but {why}: dropout stays on and "
            "BatchNorm normalises with batch statistics (and updates its running stats), "
            "so metrics are noisy and worse than the model's real quality"
            + (
                "; the loop repeats one forward on the same inputs while the function "
                "measures time or memory, so no metric comes out of it"
                if measured
                else ""
            ),
            fix_hint=f"Call `{model}.eval()` before the evaluation loop, and "
            f"`{model}.train()` before training resumes.",
            confidence=Confidence.MEDIUM if state == "no callers" else Confidence.HIGH,
            evidence={"loop_line": loop.line},
            severity=Severity.INFO if measured else None,
        )


@detector("TD502", depth=Depth.LINT)
class TrainInEvalMode(LintRule):
    """A loop that trains and evaluates, and never puts the model back in ``train()``
    mode before the next iteration's training forward."""

    requires = ("eval",)
    _optimized: frozenset[str] | None = None

    def leave_module(self, module: ModuleScope) -> None:
        if not _sets_eval_mode(module):
            return  # no action can be an eval(): nothing to find (most files)
        reported: set[int] = set()
        self._optimized = optimized_models(self.ctx, module)
        for loop in module.all_loops:
            self._check(loop, reported)

    def _check(self, loop: Loop, reported: set[int]) -> None:
        ctx = self.ctx
        if framework_owned(ctx, loop.function) or not self._may_train(loop):
            return  # a framework sets train()/eval() around its own hooks
        actions = exclusive_modes(ctx, expand(ctx, loop.items, loop.function))
        if not any(a.kind is EventKind.BACKWARD for a in actions) or not any(
            a.kind is EventKind.EVAL for a in actions
        ):
            return
        if not any(a.steps for a in actions) and not self._steps_in(loop.function):
            return  # backward() for the inputs' gradients (Langevin sampling, an attack)
        modes: dict[str, tuple[EventKind, int]] = {}
        for second_pass in (False, True):
            for index, action in enumerate(actions):
                if action.kind in MODE and not _leaves_the_loop_after(loop, action):
                    modes[action.target] = (action.kind, index)
                elif (
                    action.kind is EventKind.FORWARD
                    and action.grad
                    and second_pass
                    and _trains(actions, index)
                ):
                    mode = modes.get(action.target)
                    if (
                        mode is None
                        or mode[0] is not EventKind.EVAL
                        or id(actions[mode[1]].origin) in reported
                    ):
                        continue
                    after = mode[1] > index  # eval() after the forward: the next iteration
                    if _frozen_where_evaluated(ctx, actions[mode[1]]):
                        continue  # MOON's old models: eval() and no gradients, kept as is
                    if not after and _frozen_backbone(ctx.tree):
                        return  # a linear probe: eval() on purpose, only a head trains
                    if not after and _trained_again(actions, index, action.target):
                        continue  # eval() scoped to this forward: a frozen discriminator
                    if _part_trained(actions, action.target):
                        continue  # train() on the part that learns, the rest left frozen
                    if action.origin.node is action.node and _output_detached(loop, action):
                        continue  # OpenOOD's CSI: features.detach() feeds linear heads
                    if not self._trained(action.target):
                        return  # a teacher no optimizer takes: eval mode is what it needs
                    if is_mode_sensitive(ctx, _first_target(action), loop.function):
                        reported.add(id(actions[mode[1]].origin))
                        # train() at the loop's top only helps an eval() the forward
                        # precedes; one between them would still win.
                        self._report(loop, actions[mode[1]], action, after)
                    return

    def _steps_in(self, function: FunctionScope | None) -> bool:
        """Whether the function holding a loop (or the module, for a top-level loop)
        steps an optimizer anywhere, following its calls into the file."""
        items = function.items if function is not None else self.ctx.module.items
        return any(a.steps for a in expand(self.ctx, items, function))

    def _trained(self, model: str) -> bool:
        """Whether ``model`` may be trained: an optimizer of the file takes its parameters,
        or the file's optimizers cannot all be read."""
        optimized = self._optimized
        return optimized is None or any(covers(trained, model) for trained in optimized)

    def _may_train(self, loop: Loop) -> bool:
        """Cheap pre-check: the loop steps or backpropagates itself, or calls a function of
        this file (which may)."""
        if any(
            e.kind in (EventKind.BACKWARD, EventKind.OPTIMIZER_STEP)
            for e in loop_events(self.ctx, loop, forwards=False)
        ):
            return True
        return any(
            isinstance(item.node, ast.Call)
            and self.ctx.resolve_local_call(item.node, loop.function) is not None
            for item in loop.items
        )

    def _report(self, loop: Loop, eval_action: Action, forward: Action, after: bool) -> None:
        ctx = self.ctx
        origin = eval_action.origin
        model = eval_action.target
        inside = (
            ""
            if origin.node is eval_action.node
            else (
                f" (it calls `{ctx.segment(eval_action.node)}` at line "
                f"{getattr(eval_action.node, 'lineno', '?')})"
            )
        )
        self.report(
            origin.node,
            f"`{ctx.segment(origin.node)}` at line {origin.line} leaves `{model}` in eval "
            f"mode{inside}, and nothing in the loop at line {loop.line} calls "
            f"`{model}.train()` again: "
            + ("from the next iteration on" if after else "from the first iteration")
            + f", the training forward `{ctx.segment(forward.node)}` (line "
            f"{getattr(forward.node, 'lineno', '?')}) runs with dropout off and BatchNorm "
            "statistics frozen",
            fix_hint=f"Call `{model}.train()` at the start of every epoch, before the "
            "training forward.",
            fix=self._fix(loop, model) if after else None,
            evidence={"loop_line": loop.line},
        )

    def _fix(self, loop: Loop, model: str) -> Fix | None:
        body = loop.node.body
        if not body or body[0].lineno == loop.node.lineno or not model:
            return None
        edit = self.ctx.insert_before_statement(body[0], f"{model}.train()")
        return Fix(f"Call `{model}.train()` at the top of the loop", (edit,), Applicability.UNSAFE)


def _free_in(scope: FunctionScope, model: str) -> bool:
    """Whether the name ``model`` starts with is neither a parameter of ``scope`` nor
    bound in it: a free variable, read from the function around it."""
    root = model.split(".")[0]
    if not root or root in scope.parameter_names:
        return False
    return not any(
        isinstance(node, ast.Name) and node.id == root and isinstance(node.ctx, ast.Store)
        for node in ast.walk(scope.node)
    )


def _leaves_the_loop_after(loop: Loop, action: Action) -> bool:
    """The mode change sits in an ``if`` branch of the loop that ends with ``break``,
    ``return`` or ``raise`` (VoiceCraft: past the last step, ``validate_and_save()`` and
    then ``break``): no later statement of the pass, nor any later pass, runs after it."""
    body = innermost_branch(loop.inner_frames(action.origin)) or []
    return any(
        isinstance(statement, (ast.Break, ast.Return, ast.Raise))
        and statement.lineno > action.origin.line
        for statement in body
    )


def _evaluating_method_call(
    ctx: FileContext, items: list[Item], names: set[str], scope: FunctionScope | None
) -> int:
    """The line of the last ``model.test()`` / ``model.predict(...)`` / ``model.evaluate()``
    among ``items``: a method of the model's own class, defined in code lint does not read
    (DeepRobust's ``BaseModel.test()`` calls ``self.eval()``), that evaluates it and so
    sets its mode; 0 when there is none. A method of this file is read as a helper."""
    found = 0
    for item in items:
        node = item.node
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and ast.unparse(node.func.value) in names
            and set(torchapi.name_tokens(node.func.attr)) & _EVALUATING_WORDS
            and ctx.resolve_local_call(node, scope) is None
        ):
            found = max(found, item.line)
    return found


# Words of a model method that evaluates the model (and so sets its mode itself).
_EVALUATING_WORDS = frozenset(
    {"test", "evaluate", "evaluation", "validate", "validation", "predict", "inference"}
)

# Words of a library method that trains or evaluates the models handed to it.
_RUNNING_WORDS = _EVALUATING_WORDS | {"fit", "train"}


def _run_by_a_library(
    ctx: FileContext, items: list[Item], names: set[str], scope: FunctionScope | None
) -> int:
    """The line of the last ``fit()``/``train()``/``evaluate()``-like call of code lint
    does not read that runs the model: an object built from it (``clf =
    EEGClassifier(model, ...)`` then ``clf.fit(...)``, a skorch net whose validation
    leaves the module in eval mode) or a call taking it (``trainer.fit(model)``). The
    library sets the mode as it trains and evaluates, and lint cannot say which it
    leaves; 0 when there is none."""
    holders = set(names)
    found = 0
    for item in items:
        node = item.node
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            if _foreign_call_taking(ctx, node.value, holders, scope):
                holders |= {ast.unparse(t) for t in node.targets if isinstance(t, ast.Name)}
            continue
        call = node.value if isinstance(node, ast.Expr) else node
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)):
            continue
        if not set(torchapi.name_tokens(call.func.attr)) & _RUNNING_WORDS:
            continue
        owner = ast.unparse(call.func.value)
        if (owner in holders and owner not in names) or _foreign_call_taking(
            ctx, call, names, scope
        ):
            found = max(found, item.line)
    return found


def _foreign_call_taking(
    ctx: FileContext, call: ast.Call, names: set[str], scope: FunctionScope | None
) -> bool:
    """``call`` hands one of ``names`` (or a module of this file built around one,
    ``Net(Classifier(embedder))``) to code lint does not read: not torch, not a function
    or class of this file."""
    given = [*call.args, *(k.value for k in call.keywords)]
    if not any(
        ast.unparse(arg) in names
        or (isinstance(arg, ast.Call) and any(_module_class_keeps(ctx, arg, n) for n in names))
        for arg in given
    ):
        return False
    qualified = ctx.qualified_name(call.func, scope) or ""
    if qualified.split(".")[0] == "torch" or ctx.resolve_local_call(call, scope) is not None:
        return False
    return not (isinstance(call.func, ast.Name) and ctx.local_class(call.func.id) is not None)


def _aliases(items: list[Item], model: str) -> set[str]:
    """Local names bound to the model (``model = self.model``, DeepRobust's attacks):
    ``model.eval()`` puts ``self.model`` in eval mode."""
    return {
        target.id
        for item in items
        if isinstance(item.node, ast.Assign) and ast.unparse(item.node.value) == model
        for target in item.node.targets
        if isinstance(target, ast.Name)
    }


# How many `self.a = self.b` links an attribute alias is followed through.
_ALIAS_DEPTH = 3


def _attribute_aliases(ctx: FileContext, scope: FunctionScope | None, model: str) -> set[str]:
    """The attributes of ``self`` that are the same module as ``model`` (``self.<x>``):
    those whose every binding in the class is one other attribute (makani's trainers:
    ``self.model_eval = self.model`` in each branch of ``_compile_model()``), followed
    through a few links, so ``self.model.eval()`` sets the mode of ``self.model_eval``
    and the other way round. An attribute bound to anything else in some binding (a
    copy, an EMA) is a module of its own."""
    owner = scope.owner if scope is not None else None
    me = scope.self_name if scope is not None else None
    if owner is None or me is None or not model.startswith(me + "."):
        return set()
    key = ("TD501.attribute-roots", id(owner.node))
    if key not in ctx.memo:  # once per class
        ctx.memo[key] = _attribute_roots(owner)
    roots = cast("dict[str, str]", ctx.memo[key])
    attribute = model[len(me) + 1 :]
    root = roots.get(attribute, attribute)
    return {f"{me}.{name}" for name, other in roots.items() if other == root} | {f"{me}.{root}"}


def _attribute_roots(owner: ClassScope) -> dict[str, str]:
    """For each attribute of ``self`` that only aliases others, the attribute it
    ultimately is (``{"model_eval": "model"}``)."""
    sources = _attribute_sources(owner)

    def root(name: str, depth: int) -> str:
        found = sources.get(name)
        if not found or None in found or depth >= _ALIAS_DEPTH:
            return name
        ends = {root(source, depth + 1) for source in found if source is not None}
        return ends.pop() if len(ends) == 1 else name

    roots = {name: root(name, 0) for name in sources}
    return {name: end for name, end in roots.items() if end != name}


def _attribute_sources(owner: ClassScope) -> dict[str, set[str | None]]:
    """What each binding of ``self.<x>`` in the class's methods binds it to: the name of
    another attribute of ``self`` (``self.model_eval = self.model``), or ``None`` for
    anything else (a call, an unpacking, an augmented assignment)."""
    sources: dict[str, set[str | None]] = {}
    for method in owner.methods.values():
        me = method.self_name
        if me is None:
            continue
        direct: dict[int, str | None] = {}
        for node in ast.walk(method.node):  # breadth first: an Assign before its targets
            if isinstance(node, ast.Assign):
                source = _own_attribute(node.value, me)
                for target in node.targets:
                    direct[id(target)] = source
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                name = _own_attribute(node, me)
                if name is not None:
                    source = direct.get(id(node))
                    sources.setdefault(name, set()).add(None if source == name else source)
    return sources


def _own_attribute(node: ast.expr, me: str) -> str | None:
    """``x`` for ``self.x`` (``me`` the method's instance name), else ``None``."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == me:
        return node.attr
    return None


# What holds a module as its child, so that its eval()/train() set the module's mode too.
_HOLDERS = frozenset({*torchapi.WRAPPER_NAMES, "torch.compile"})
# Module methods that return the module itself.
_SAME_MODULE = frozenset({"to", "cuda", "cpu", "float", "half", "double", "bfloat16", "train"})


def _wrappers_of(
    ctx: FileContext, scope: FunctionScope | None, items: list[Item], model: str
) -> set[str]:
    """Names bound to a wrapper of the model (``self.model_ddp =
    DistributedDataParallel(self.model)``, RobustVideoMatting's trainer; ``net =
    torch.compile(model)``): the wrapper's ``eval()`` sets the model's mode as well.
    Attributes anywhere in the class, local names before the loop."""
    statements: list[ast.AST] = [item.node for item in items]
    if model.startswith("self.") and scope is not None and scope.owner is not None:
        statements += list(ast.walk(scope.owner.node))
    found: set[str] = set()
    for node in statements:
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)):
            continue
        call = node.value
        while (  # `_DNE(args, self.net).to(device)`: the module the chain returns
            isinstance(call.func, ast.Attribute)
            and call.func.attr in _SAME_MODULE
            and isinstance(call.func.value, ast.Call)
        ):
            call = call.func.value
        if ctx.qualified_name(call.func, scope) in _HOLDERS:
            wrapped = call.args[0] if call.args else None
            wrapped = wrapped or next((k.value for k in call.keywords if k.arg == "module"), None)
            holds = wrapped is not None and ast.unparse(wrapped) == model
        else:
            holds = _module_class_keeps(ctx, call, model)
        if holds:
            found |= {
                ast.unparse(t) for t in node.targets if isinstance(t, (ast.Name, ast.Attribute))
            }
    return found


def _held_model(ctx: FileContext, scope: FunctionScope | None, model: str) -> set[str]:
    """The one model that every binding of the evaluated name wraps or is (deq's
    ``para_model = nn.DataParallel(model).to(device)`` or ``model.to(device)``, at module
    level for a function reading the global): ``model.eval()`` sets its mode too, since
    ``.to()`` returns the module itself and DataParallel's replicas copy the module's."""
    if not model.isidentifier():
        return set()
    local = [i.node for i in scope.items] if scope is not None else []
    bindings = [n for n in local if _binds(n, model)]
    if not bindings and scope is not None and model not in _parameters(scope):
        bindings = [i.node for i in ctx.module.items if _binds(i.node, model)]
    held: set[str] = set()
    for node in bindings:
        value: ast.expr | None = cast("ast.Assign", node).value
        while (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Attribute)
            and value.func.attr in _SAME_MODULE
        ):
            value = value.func.value
        if isinstance(value, ast.Call) and (  # the wrapped model, passed by name
            ctx.qualified_name(value.func, scope) in _HOLDERS
            or last_name(value.func).endswith("DataParallel")
        ):
            value = next((a for a in value.args if isinstance(a, ast.Name)), None)
        if not isinstance(value, ast.Name) or value.id == model:
            return set()
        held.add(value.id)
    return held if len(held) == 1 else set()


def _parameters(scope: FunctionScope) -> set[str]:
    args = scope.node.args
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
    return {a.arg for a in every if a is not None}


def _binds(node: ast.AST, name: str) -> bool:
    return (
        isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Name)
        and node.targets[0].id == name
    )


def _module_class_keeps(ctx: FileContext, call: ast.Call, model: str) -> bool:
    """Whether ``call`` builds an ``nn.Module`` of this file that keeps the model, passed
    to it, as an attribute of its own: a child (open-iad's ``self.model = _DNE(self.args,
    self.net, ...)``, whose ``__init__`` sets ``self.net = net``)."""
    if not isinstance(call.func, ast.Name):
        return False
    cls = ctx.local_class(call.func.id)
    if cls is None or not ctx.is_family(f"<local>.{cls.name}", torchapi.MODULE):
        return False
    init = cls.methods.get("__init__")
    if init is None:
        return False
    passed = {
        name
        for name in init.parameter_names
        if (given := init.argument_for(call, name)) is not None and ast.unparse(given) == model
    }
    return any(
        isinstance(n, ast.Assign)
        and isinstance(n.value, ast.Name)
        and n.value.id in passed
        and any(
            isinstance(t, ast.Attribute) and ast.unparse(t).startswith("self.") for t in n.targets
        )
        for n in ast.walk(init.node)
    )


def _frozen_where_evaluated(ctx: FileContext, evaluation: Action) -> bool:
    """The block that calls ``eval()`` on the model also freezes every parameter of it
    (``for p in net.parameters(): p.requires_grad = False``, ``net.requires_grad_(False)``):
    a model kept as a fixed reference (MOON's previous-round models, a frozen teacher),
    which no step can train, whatever its name is later bound to."""
    node = evaluation.node
    if not (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "eval"
        and evaluation.frames
    ):
        return False
    model = ctx.segment(node.func.value)
    for inner in ast.walk(evaluation.frames[-1].node):
        setting = requires_grad_setting(inner)
        if setting is not None and not setting[1] and ctx.segment(setting[0]) == model:
            return True  # net.requires_grad_(False)
        if (
            isinstance(inner, ast.For)
            and isinstance(inner.target, ast.Name)
            and isinstance(inner.iter, ast.Call)
            and isinstance(inner.iter.func, ast.Attribute)
            and inner.iter.func.attr == "parameters"
            and ctx.segment(inner.iter.func.value) == model
        ):
            for statement in inner.body:  # for p in net.parameters(): p.requires_grad = False
                setting = requires_grad_setting(statement)
                if (
                    setting is not None
                    and not setting[1]
                    and isinstance(setting[0], ast.Name)
                    and setting[0].id == inner.target.id
                ):
                    return True
    return False


def _frozen_backbone(tree: ast.Module) -> bool:
    """The file freezes parameters (``p.requires_grad = False``, ``requires_grad_(False)``)
    or gives an optimizer only a submodule's (``SGD(model.fc.parameters())``): a model
    kept in eval mode while its head trains is a linear probe, on purpose."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            if (
                isinstance(node.value, ast.Constant)
                and node.value.value is False
                and any(
                    isinstance(t, ast.Attribute) and t.attr == "requires_grad" for t in node.targets
                )
            ):
                return True
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            func = node.func
            if func.attr == "requires_grad_" and any(
                isinstance(a, ast.Constant) and a.value is False for a in node.args
            ):
                return True
            if func.attr[:1].isupper() and any(_submodule_parameters(a) for a in node.args[:1]):
                return True  # torch.optim.SGD(model.fc.parameters(), ...)
    return False


def _submodule_parameters(expr: ast.expr) -> bool:
    """``model.fc.parameters()``: a submodule's parameters (not ``self.model``'s, nor a
    wrapper's ``model.module``)."""
    if not (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Attribute)
        and expr.func.attr == "parameters"
    ):
        return False
    owner = expr.func.value
    return (
        isinstance(owner, ast.Attribute)
        and owner.attr != "module"
        and not (isinstance(owner.value, ast.Name) and owner.value.id == "self")
    )


def _sets_eval_mode(module: ModuleScope) -> bool:
    """Whether any call of the file may put a model in eval mode: ``x.eval()`` or
    ``x.train(...)``, the only calls classified as one (every call is an item of the
    module or of a function, and :func:`expand` reads nothing else)."""
    for _, items in module.bodies():
        for item in items:
            node = item.node
            if node.__class__ is ast.Call:
                func = node.func
                if func.__class__ is ast.Attribute and func.attr in ("eval", "train"):
                    return True
    return False


def _trains(actions: list[Action], index: int) -> bool:
    """Whether the forward at ``index`` is a training forward: a backward follows it
    (going round the loop), then an optimizer step, before the mode is set again. A
    forward after ``eval()`` in an evaluation written without ``no_grad`` is not one, nor
    is one whose backward only serves the input (a PGD attack run at evaluation, whose
    helper sets the mode back before anything steps)."""
    backward = False
    for action in actions[index + 1 :] + actions[:index]:
        if action.kind is EventKind.BACKWARD:
            backward = True
        if backward and action.steps:
            return True
        if action.kind in MODE:
            return False
    return backward


def _trained_again(actions: list[Action], index: int, model: str) -> bool:
    """Whether ``model.train()`` follows the forward at ``index`` in the same pass, before
    any other ``eval()`` of it: the eval mode was set for that forward alone (ADVENT
    freezes its discriminator's statistics while the generator trains against it)."""
    for action in actions[index + 1 :]:
        if action.target != model:
            continue
        if action.kind is EventKind.TRAIN:
            return True
        if action.kind is EventKind.EVAL:
            return False
    return False


def _part_trained(actions: list[Action], model: str) -> bool:
    """Whether the loop calls ``train()`` on a part of ``model`` (``model.heads[-1].train()``,
    FACIL's head warm-up): the loop sets modes part by part, the part that learns in train
    mode and the frozen rest left in eval mode on purpose (its BatchNorm statistics fixed)."""
    return any(
        action.kind is EventKind.TRAIN and action.target.startswith((model + ".", model + "["))
        for action in actions
    )


def _output_detached(loop: Loop, action: Action) -> bool:
    """The forward's result is bound to names that the loop reads only through
    ``.detach()`` or ``.data``: no gradient reaches the model from it, so it trains
    nothing there (a linear probe on frozen features, whose model is in eval mode on
    purpose)."""
    statement = next(
        (
            item.node
            for item in loop.items
            if isinstance(item.node, ast.Assign)
            and any(node is action.node for node in ast.walk(item.node.value))
        ),
        None,
    )
    if statement is None:
        return False
    names = {n.id for t in statement.targets for n in ast.walk(t) if isinstance(n, ast.Name)} - {
        "_"
    }
    parents = {id(c): n for n in ast.walk(loop.node) for c in ast.iter_child_nodes(n)}
    uses = [
        n
        for n in ast.walk(loop.node)
        if isinstance(n, ast.Name) and n.id in names and isinstance(n.ctx, ast.Load)
    ]
    return bool(uses) and all(
        isinstance(parent := parents.get(id(use)), ast.Attribute)
        and parent.attr in ("detach", "data")
        for use in uses
    )


def _first_target(action: Action) -> ast.expr | None:
    node = action.node
    return node.func if isinstance(node, ast.Call) else None


def _owned_by(model: str, scope: FunctionScope) -> bool:
    """``model`` is the method's own object or one of its submodules (``self``,
    ``self.transformer``): a mode set on ``self`` reaches it."""
    owner = scope.self_name
    return owner is not None and (model == owner or model.startswith(owner + "."))


def _method_of_a_module(ctx: FileContext, scope: FunctionScope) -> bool:
    """Whether ``scope`` is a method of an ``nn.Module`` subclass (of this file's classes
    or, through its bases, the project's)."""
    owner = scope.owner
    if owner is None:
        return False
    if ctx.is_family(f"<local>.{owner.name}", torchapi.MODULE):
        return True
    info = ctx.project.module_class(f"<local>.{owner.name}", near=ctx.path)
    return bool(info is not None and info.is_module) or _acts_as_a_module(owner.node)


# What only an nn.Module does to itself: XTTS's `def eval(self): ... super().eval()`
# shows a module whose base lint cannot resolve (a trainer package's model class).
# Not `state_dict()` or `load_state_dict()`: trainers define their own for checkpoints.
_MODULE_SELF_CALLS = frozenset(
    {"parameters", "named_parameters", "modules", "named_modules", "children"}
    | {"register_buffer", "register_parameter"}
)


def _acts_as_a_module(cls: ast.ClassDef) -> bool:
    """Whether a class of unresolved bases behaves as an ``nn.Module``: it calls
    ``super().eval()``/``super().train()`` or, on ``self``, a method only a module has
    (``self.parameters()``, ``self.register_buffer(...)``)."""
    for node in ast.walk(cls):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        receiver, method = node.func.value, node.func.attr
        if (
            method in ("eval", "train")
            and isinstance(receiver, ast.Call)
            and isinstance(receiver.func, ast.Name)
            and receiver.func.id == "super"
        ):
            return True
        if (
            method in _MODULE_SELF_CALLS
            and isinstance(receiver, ast.Name)
            and receiver.id == "self"
        ):
            return True
    return False


def _eval_decorator(tree: ast.Module, scope: FunctionScope) -> str | None:
    """The name of a decorator of ``scope`` defined in this file whose wrapper calls
    ``.eval()`` on its first argument, the decorated method's object (``@eval_decorator``
    around a sampling method, restoring the mode after): ``None`` if there is none."""
    node = scope.node
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    local = {f.name: f for f in tree.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
    for decorator in node.decorator_list:
        name = decorator.id if isinstance(decorator, ast.Name) else None
        outer = local.get(name or "")
        if outer is None:
            continue
        for wrapper in ast.walk(outer):
            if wrapper is outer or not isinstance(wrapper, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if not wrapper.args.args:
                continue
            first = wrapper.args.args[0].arg
            if any(
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and call.func.attr == "eval"
                and isinstance(call.func.value, ast.Name)
                and call.func.value.id == first
                for call in ast.walk(wrapper)
            ):
                return name
    return None


def _built_in_eval(ctx: FileContext, scope: FunctionScope | None, model: str) -> str | None:
    """Where ``model`` was put in eval mode as it was built, if it was: a local name bound
    once to a chain ending in ``.eval()`` (``loss = Loss(cfg).to(device).eval()``) or to
    the result of a function of this file that calls ``.eval()`` on what it returns
    (``act_rec_model = initialize_model(...)``), or ``self.<x>`` that the class's
    ``__init__`` puts in eval mode and no method of the class puts back in training."""
    if model.startswith("self.") and scope is not None and scope.owner is not None:
        cls = scope.owner.node
        attribute = model[len("self.") :]
        init = next(
            (
                f
                for f in cls.body
                if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.name == "__init__"
            ),
            None,
        )
        if _calls_mode(cls, {model}, "train"):
            return None
        builder = _evaluated_where_built(cls, model)
        if builder is not None:
            return f"`{attribute}` put in eval mode where `{builder}()` builds it"
        init_scope = scope.owner.methods.get("__init__")
        if init is None or init_scope is None:
            return None
        for setup in _setup_methods(scope.owner, init_scope):
            if _last_binding_evaluates(ctx, setup, model):
                return f"`{attribute}` put in eval mode by `{setup.name}()`"
        sources = {model} | {
            ast.unparse(n.value)
            for n in ast.walk(init)
            if isinstance(n, ast.Assign)
            and isinstance(n.value, ast.Name)
            and any(ast.unparse(t) == model for t in n.targets)
        }
        if _calls_mode(init, sources, "eval"):
            return f"`{attribute}` put in eval mode by `__init__`"
        built = [
            n.value
            for n in ast.walk(init)
            if isinstance(n, ast.Assign)
            and isinstance(n.value, ast.Call)
            and any(ast.unparse(t) == model for t in n.targets)
        ]
        if len(built) == 1:
            return _evaluating_class(ctx, built[0], scope.owner.methods.get("__init__"))
        return None
    if "." in model:
        return None
    body = scope.node if scope is not None else ctx.tree
    values = [
        n.value
        for n in (ast.walk(body) if scope is not None else own_nodes(ctx.tree))
        if isinstance(n, ast.Assign)
        and len(n.targets) == 1
        and isinstance(n.targets[0], ast.Name)
        and n.targets[0].id == model
    ]
    if len(values) != 1 or not isinstance(values[0], ast.Call):
        return None  # bound once, to a call: what that call returns is the model
    value = values[0]
    if _chain_calls_eval(value):
        return f"`{ast.unparse(value)[:60]}` (line {value.lineno})"
    evaluated = _evaluating_class(ctx, value, scope)
    if evaluated is not None:
        return evaluated
    factory = _evaluating_factory(ctx, value, scope)
    return None if factory is None else f"`{factory}()`, which returns it in eval mode"


def _evaluating_factory(
    ctx: FileContext, value: ast.Call, scope: FunctionScope | None
) -> str | None:
    """The name of the function or method of this file that ``value`` calls, when it puts
    what it returns in eval mode (``net.eval(); return net``, or ``return
    Net().eval()``)."""
    factory = ctx.resolve_local_call(value, scope)
    if factory is None:
        return None
    returns = returns_of(factory.node)
    returned = {r.value.id for r in returns if isinstance(r.value, ast.Name)}
    chained = [r.value for r in returns if isinstance(r.value, ast.Call)]
    if (returned and _calls_mode(factory.node, returned, "eval")) or (
        chained and len(chained) == len(returns) and all(map(_chain_calls_eval, chained))
    ):
        return factory.name
    return None


def _setup_methods(owner: ClassScope, init: FunctionScope) -> list[FunctionScope]:
    """``__init__`` and the methods it calls on ``self`` (``self.init_model()``), which
    run before any other method can."""
    found = [init]
    for node in ast.walk(init.node):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "self"
            and node.func.attr in owner.methods
        ):
            found.append(owner.methods[node.func.attr])
    return found


def _evaluated_where_built(cls: ast.ClassDef, model: str) -> str | None:
    """The name of a method that binds ``model`` (``self.<x>``), when every method of the
    class that binds it puts it in eval mode after its last binding, in the same block
    (tabicl's ``_load_model()``: ``self.model_ = TabICL(**config)``, its weights loaded,
    then ``self.model_.eval()``): whichever built it, the model is in eval mode."""
    builders = []
    for method in cls.body:
        if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        bindings = [
            node
            for node in ast.walk(method)
            if isinstance(node, ast.Assign) and any(ast.unparse(t) == model for t in node.targets)
        ]
        if not bindings:
            continue
        last = max(bindings, key=lambda node: node.lineno)
        if not any(
            isinstance(later, ast.Expr) and _calls_mode(later, {model}, "eval")
            for later in _after_in_block(method, last)
        ):
            return None
        builders.append(method.name)
    return builders[0] if builders else None


def _after_in_block(root: ast.AST, statement: ast.stmt) -> list[ast.stmt]:
    """The statements after ``statement`` in the block that holds it, under ``root``."""
    for node in ast.walk(root):
        for name in ("body", "orelse", "finalbody"):
            block = getattr(node, name, None)
            if isinstance(block, list) and statement in block:
                return block[block.index(statement) + 1 :]
    return []


def _last_binding_evaluates(ctx: FileContext, function: FunctionScope, model: str) -> bool:
    """In ``function``, ``model`` is last built by a chain with ``.eval()``
    (``self.model = Net().to(device).eval()``) or by a helper of this file that returns
    it in eval mode (face-alignment's ``self.net = self._load_native(...)``), and every
    later binding only derives it from itself (``torch.compile(self.model)``,
    ``self.model.half()``)."""
    bindings = sorted(
        (
            node
            for node in ast.walk(function.node)
            if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and any(ast.unparse(t) == model for t in node.targets)
        ),
        key=lambda node: node.lineno,
    )
    for index, binding in enumerate(bindings):
        value = cast("ast.Call", binding.value)
        if _chain_calls_eval(value) or _evaluating_factory(ctx, value, function) is not None:
            later = bindings[index + 1 :]
            if all(
                any(ast.unparse(n) == model for n in ast.walk(b.value) if isinstance(n, ast.expr))
                for b in later
            ):
                return True
    return False


def _evaluating_class(ctx: FileContext, value: ast.Call, scope: FunctionScope | None) -> str | None:
    """Where a model built by ``value`` is put in eval mode, when it is an instance of a
    project class whose constructor calls ``self.eval()`` (a frozen pretrained network,
    built directly or by a factory of another file)."""
    type_name = ctx.instance_type(value, scope)
    info = None if type_name is None else ctx.project.module_class(type_name, near=ctx.path)
    if info is None or not info.evaluates_itself:
        return None
    return f"`{info.name}`, whose constructor calls `self.eval()`"


def _chain_calls_eval(value: ast.Call) -> bool:
    """``Loss(cfg).to(device).eval()``, ``Net().eval().to(device)``: a method chain with an
    argument-less ``.eval()`` link."""
    node: ast.expr = value
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if node.func.attr == "eval" and not node.args and not node.keywords:
            return True
        node = node.func.value
    return False


def _calls_mode(root: ast.AST, names: set[str], method: str) -> bool:
    """Whether ``root`` calls ``<name>.<method>()`` (``eval``/``train``) on one of
    ``names`` (``model``, ``self.model``); ``train(False)`` counts as ``eval``."""
    for node in ast.walk(root):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if ast.unparse(node.func.value) not in names:
            continue
        attr = node.func.attr
        off = bool(node.args) and isinstance(node.args[0], ast.Constant) and not node.args[0].value
        if method == "eval" and (attr == "eval" or (attr == "train" and off)):
            return True
        if method == "train" and attr == "train" and not off:
            return True
    return False
