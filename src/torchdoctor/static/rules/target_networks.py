"""TD222 target-network-not-detached: a target/teacher/EMA network's output with its graph.

A second copy of the model (``copy.deepcopy(model)``, ``AveragedModel(model)``, or a module
named ``target``/``teacher``/``ema``/``momentum``...) that no optimizer trains and whose
parameters still require grad. Called in a training step outside ``torch.no_grad()`` and
never detached, its output carries a graph into the loss: ``backward()`` walks the target
network and fills its ``.grad`` on every step, memory and time spent on a value that
bootstrapped losses (DQN, BYOL, distillation) mean as a constant.
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass

from torchdoctor.findings import Depth
from torchdoctor.rules.detectors import detector
from torchdoctor.static import torchapi
from torchdoctor.static.analysis.callers import called_function
from torchdoctor.static.analysis.loops import element_pairs
from torchdoctor.static.analysis.optimized import is_optimizer
from torchdoctor.static.analysis.step_sequences import Body, Kind, sequences
from torchdoctor.static.bindings import BindingKind
from torchdoctor.static.context import FileContext, Scope
from torchdoctor.static.grad_mode import grad_disabled_by
from torchdoctor.static.names import returns_of
from torchdoctor.static.rules.base import LintRule
from torchdoctor.static.structure import FunctionScope, Item, ModuleScope

_COPIES = ("copy.deepcopy", "torch.optim.swa_utils.AveragedModel")
_TARGET_WORDS = frozenset({"target", "teacher", "ema", "momentum", "shadow", "averaged", "frozen"})


@dataclass(frozen=True, slots=True)
class _Target:
    text: str
    node: ast.Assign
    how: str


@functools.lru_cache(maxsize=4096)
def _target_name(name: str) -> bool:
    """Whether a variable's name says it holds a target network (``target_net``,
    ``emaModel``); asked of every assignment's target, so remembered."""
    return not _TARGET_WORDS.isdisjoint(torchapi.name_tokens(name))


def _may_call_averaged_model(value: ast.expr) -> bool:
    """Whether ``value`` may be a call of ``AveragedModel``: a call of a plain name (an
    import or alias can rename it) or of an attribute ending in that name (a qualified
    name keeps its last part)."""
    if not isinstance(value, ast.Call):
        return False
    func = value.func
    if isinstance(func, ast.Attribute):
        return func.attr == _COPIES[1].rpartition(".")[2]
    return isinstance(func, ast.Name)


@detector("TD222", depth=Depth.LINT)
class TargetNetworkNotDetached(LintRule):
    """The output of a target network flows into a backward() with its graph."""

    requires = ("backward",)
    needs_structure = True

    def leave_module(self, module: ModuleScope) -> None:
        source = self.ctx.source
        if any(name in source for name in _REGRESSION_NAMES):  # else no loss to bootstrap
            for function in module.functions:
                self._bootstraps(function)
        self._target_networks(module)

    def _bootstraps(self, function: FunctionScope) -> None:
        """A regression loss whose target is bootstrapped (``rewards + gamma * q_next``)
        from the very network its prediction comes from, computed with autograd on."""
        ctx = self.ctx
        for item in function.items:
            call = item.node
            if not (isinstance(call, ast.Call) and len(call.args) >= 2):
                continue
            if not self._regression_loss(call, function):
                continue
            predicted, target = call.args[0], call.args[1]
            trained = {ctx.segment(c.func) for c in self._network_calls(predicted, function, 0)}
            bootstrapped, where = _bound(ctx, target, function), function
            if trained and isinstance(bootstrapped, ast.Call):
                # target = self._td_target(...): the helper's one returned value
                helper = self._returned_by(bootstrapped, function)
                if helper is not None:
                    bootstrapped, where = helper
            if not trained or not (
                isinstance(bootstrapped, ast.BinOp)
                and isinstance(bootstrapped.op, (ast.Add, ast.Sub))
            ):
                continue
            if all(self._network_calls(term, where, 0) for term in _terms(bootstrapped)):
                continue  # no reward beside the network's values: a mixup, a consistency
            for source in self._network_calls(bootstrapped, where, 0):
                if ctx.segment(source.func) in trained and self._with_grad(source, where):
                    self._report_bootstrap(source, call, ctx.segment(target))
                    return

    def _returned_by(
        self, call: ast.Call, caller: FunctionScope
    ) -> tuple[ast.expr, FunctionScope] | None:
        """The value a helper of the same class (or module) returns, when it has one
        ``return`` and the call runs with autograd on."""
        helper = called_function(self.ctx, call, caller)
        if helper is None or helper is caller or helper.owner is not caller.owner:
            return None
        if not self._with_grad(call, caller):
            return None
        returns = [r for r in returns_of(helper.node) if r.value is not None]
        if len(returns) != 1 or returns[0].value is None:
            return None
        return _bound(self.ctx, returns[0].value, helper), helper

    def _regression_loss(self, call: ast.Call, scope: Scope) -> bool:
        ctx = self.ctx
        qualified = ctx.qualified_name(call.func, scope) or ""
        if qualified.rpartition(".")[2] in _REGRESSION_FUNCTIONS:
            return qualified.startswith("torch.")
        type_name = ctx.instance_type(call.func, scope) or ""
        return type_name.rpartition(".")[2] in _REGRESSION_CLASSES

    def _network_calls(self, expr: ast.expr, scope: Scope, depth: int) -> list[ast.Call]:
        """Module calls ``expr`` is computed from, through names bound in ``scope`` to
        values (not to the networks themselves); none through a ``.detach()``."""
        ctx = self.ctx
        found: list[ast.Call] = []
        stack: list[ast.AST] = [expr]
        while stack:
            node = stack.pop()
            if isinstance(node, ast.Call):
                func = node.func
                if isinstance(func, ast.Attribute) and func.attr in ("detach", "item"):
                    return []
                if ctx.is_in_family(func, torchapi.MODULE, scope):
                    found.append(node)
                    stack += [*node.args, *(k.value for k in node.keywords)]
                    continue
            if isinstance(node, ast.Name):
                if depth < 3 and not ctx.is_in_family(node, torchapi.MODULE, scope):
                    value = _bound(ctx, node, scope)
                    if value is not node:
                        found += self._network_calls(value, scope, depth + 1)
                continue
            stack += list(ast.iter_child_nodes(node))
        return found

    def _with_grad(self, call: ast.Call, function: FunctionScope) -> bool:
        item = next((i for i in function.items if i.node is call), None)
        return item is not None and grad_disabled_by(self.ctx, item.frames) is None

    def _report_bootstrap(self, source: ast.Call, loss: ast.Call, target: str) -> None:
        ctx = self.ctx
        network = ctx.segment(source.func)
        self.report(
            source,
            f"`{ctx.segment(source)[:60]}` at line {source.lineno} computes the bootstrapped "
            f"target `{target}` of the loss at line {loss.lineno} with autograd on, from "
            f"`{network}`, the network the loss trains: backward() also moves the network "
            "toward its own target (a residual gradient, not the semi-gradient TD update), "
            "so the values it learns are biased and the policy can be wrong",
            fix_hint="Compute the target under `with torch.no_grad():` (or `.detach()` "
            "it), or from a separate target network.",
        )

    def _target_networks(self, module: ModuleScope) -> None:
        ctx = self.ctx
        source = ctx.source
        if "AveragedModel" not in source:
            lowered = source.lower()
            if all(word not in lowered for word in _TARGET_WORDS):
                return  # no name can say "target" and nothing averages a model
        targets = {
            id(t.node): t
            for t in self._targets(module)
            if not self._frozen_or_trained(module, t.text)
        }
        if not targets or self._optimizes_only_inputs(module):
            return  # none, or GAN inversion / adversarial inputs: the gradient must cross
        reported: set[int] = set()
        for body in sequences(ctx):
            backwards = [a for a in body.actions if a.kind is Kind.BACKWARD]
            if not backwards:
                continue
            for item in body.items:
                node = item.node
                if not isinstance(node, ast.Call) or id(node) in reported:
                    continue
                target = targets.get(_binding_of(ctx, node, body.scope))
                if target is None or not self._live(body, item, backwards[-1].line):
                    continue
                reported.add(id(node))
                self._report(node, target)

    def _targets(self, module: ModuleScope) -> list[_Target]:
        ctx = self.ctx
        found = []
        for scope, items in module.bodies():
            for item in items:
                node = item.node
                if node.__class__ is not ast.Assign or len(node.targets) != 1:
                    continue
                target = node.targets[0]
                if target.__class__ is not ast.Name and target.__class__ is not ast.Attribute:
                    continue
                how = self._made_as_target(node.value, target, scope)
                if how is not None:
                    found.append(_Target(ctx.segment(target), node, how))
        return found

    def _made_as_target(self, value: ast.expr, target: ast.expr, scope: Scope) -> str | None:
        ctx = self.ctx
        named = _target_name(
            target.id if isinstance(target, ast.Name) else getattr(target, "attr", "")
        )
        if not named and not _may_call_averaged_model(value):
            return None  # unnamed, only an AveragedModel(...) counts (most assignments)
        if isinstance(value, ast.Call) and ctx.is_call_to(value, *_COPIES, scope=scope):
            averaged = ctx.is_call_to(value, _COPIES[1], scope=scope)
            if (
                (named or averaged)
                and value.args
                and ctx.is_in_family(value.args[0], torchapi.MODULE, scope)
            ):
                return f"a copy of `{ctx.segment(value.args[0])}`"
            return None
        if named and isinstance(value, ast.Call):
            type_name = ctx.instance_type(value, scope)
            if (
                type_name is not None
                and ctx.is_family(type_name, torchapi.MODULE)
                and not ctx.is_family(type_name, torchapi.LOSS)
            ):  # `criterion_teacher = nn.KLDivLoss()` is the student's loss, no network
                return "a second network, named as a target"
        return None

    def _frozen_or_trained(self, module: ModuleScope, text: str) -> bool:
        """``requires_grad_(False)``, a loop clearing ``requires_grad`` over its parameters,
        or its parameters handed to an optimizer."""
        ctx = self.ctx
        for scope, items in module.bodies():
            for item in items:
                node = item.node
                if not isinstance(node, ast.Call):
                    continue
                func = node.func
                if (
                    isinstance(func, ast.Attribute)
                    and func.attr == "requires_grad_"
                    and _root_text(ctx, func.value) == text
                    and node.args
                    and isinstance(node.args[0], ast.Constant)
                    and node.args[0].value is False
                ):
                    return True
                if is_optimizer(ctx, node, scope) and _mentions(ctx.segment(node), text):
                    return True
        for loop in module.all_loops:
            iterable = loop.node.iter if not isinstance(loop.node, ast.While) else None
            if (
                iterable is not None
                and _mentions(ctx.segment(iterable), text)
                and "requires_grad" in ctx.segment(loop.node)
            ):
                return True
        return False

    def _optimizes_only_inputs(self, module: ModuleScope) -> bool:
        """Every optimizer of the file is built over plain tensors (a latent, noise maps,
        an image), none over a module's parameters: no network trains here, so nothing
        chases a target, and the gradient must flow through the network to the input."""
        ctx = self.ctx
        optimizers = [
            (item.node, scope)
            for scope, items in module.bodies()
            for item in items
            if isinstance(item.node, ast.Call) and is_optimizer(ctx, item.node, scope)
        ]
        return bool(optimizers) and all(
            self._plain_tensors(call, scope) for call, scope in optimizers
        )

    def _plain_tensors(self, optimizer: ast.Call, scope: Scope) -> bool:
        """The optimizer's arguments name no parameters, through the names they use."""
        ctx = self.ctx
        for argument in [*optimizer.args[:1], *(k.value for k in optimizer.keywords)]:
            if isinstance(argument, ast.Constant):
                continue
            texts = [ctx.segment(argument)]
            for name in ast.walk(argument):
                if isinstance(name, ast.Name):
                    value = _bound(ctx, name, scope)
                    if value is name:
                        return False  # a parameter or global: it may hold parameters
                    texts.append(ctx.segment(value))
            if any("param" in text for text in texts):
                return False
        return bool(optimizer.args) or any(k.arg == "params" for k in optimizer.keywords)

    def _live(self, body: Body, item: Item, last_backward: int) -> bool:
        """Called with autograd on, before a backward(), and its result reaches a use
        with its graph: followed through the names computed from it, a value read only
        inside a ``.detach()`` (``(r + g * target_q).detach()``, ``next_q.detach()`` in
        the loss) carries no graph on."""
        ctx = self.ctx
        if grad_disabled_by(ctx, item.frames) is not None:
            return False
        if body.loop is None and item.line > last_backward:
            return False
        call = item.node
        holder = -1
        for index, other in enumerate(body.items):
            node = other.node
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("detach", "detach_")
                and _holds(node.func.value, call)
            ):
                return False  # target_net(s).detach(), (r + g * target_net(s)).detach()
            if (
                holder < 0
                and isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and _names(node.targets[0])
                and _holds(node.value, call)
            ):
                holder = index
        if holder < 0:
            return True  # used where it is made (an argument, a return): with its graph
        statement = body.items[holder].node
        assert isinstance(statement, ast.Assign)
        root: ast.AST = ctx.tree
        if body.loop is not None:
            root = body.loop.node
        elif body.scope is not None:
            root = body.scope.node
        return _reaches_with_graph(body.items[holder + 1 :], _names(statement.targets[0]), root)

    def _report(self, call: ast.Call, target: _Target) -> None:
        ctx = self.ctx
        self.report(
            call,
            f"`{ctx.segment(call)[:60]}` at line {call.lineno} runs `{target.text}` ("
            f"{target.how}, line {target.node.lineno}) with autograd on, and its output is "
            "never detached: backward() runs through the target network too, keeping its "
            "graph and filling a `.grad` that nothing uses, time and memory spent on every "
            "step for a value the loss means as a constant",
            fix_hint=f"Compute the target under `with torch.no_grad():` (or call "
            f"`.detach()` on its output), or freeze it once with "
            f"`{target.text}.requires_grad_(False)`.",
        )


_REGRESSION_FUNCTIONS = frozenset({"mse_loss", "smooth_l1_loss", "huber_loss", "l1_loss"})
_REGRESSION_CLASSES = frozenset({"MSELoss", "SmoothL1Loss", "HuberLoss", "L1Loss"})
_REGRESSION_NAMES = _REGRESSION_FUNCTIONS | _REGRESSION_CLASSES


def _terms(expr: ast.expr) -> list[ast.expr]:
    """The terms of a sum or difference (``r + gamma * q_next - alpha * log_p``)."""
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Add, ast.Sub)):
        return _terms(expr.left) + _terms(expr.right)
    return [expr]


def _bound(ctx: FileContext, expr: ast.expr, scope: Scope) -> ast.expr:
    """The value a name was assigned (in ``scope``), else ``expr`` itself."""
    if isinstance(expr, ast.Name):
        binding = ctx.binding(expr, scope)
        if binding is not None and binding.kind is BindingKind.ASSIGN and binding.value:
            return binding.value
    return expr


def _binding_of(ctx: FileContext, call: ast.Call, scope: Scope) -> int:
    """``id`` of the statement that bound what ``call`` calls (``target_net(x)``,
    ``self.teacher.forward(x)``); 0 when unknown."""
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr == "forward":
        func = func.value
    found = None
    if isinstance(func, ast.Name):
        found = ctx.lookup(func, scope)
    elif isinstance(func, ast.Attribute):
        found = ctx.attribute_binding(func, scope)
    return 0 if found is None else id(found[0].node)


def _holds(expr: ast.AST, node: ast.AST) -> bool:
    """Whether ``node`` is ``expr`` or lies inside it."""
    return any(inner is node for inner in ast.walk(expr))


def _names(target: ast.expr) -> list[str]:
    """The names an assignment target binds: ``q`` or each name of ``q, hidden = ...``
    (every one may hold part of the value); none for an attribute or a subscript."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        parts = [e.value if isinstance(e, ast.Starred) else e for e in target.elts]
        if all(isinstance(part, ast.Name) for part in parts):
            return [part.id for part in parts if isinstance(part, ast.Name)]
    return []


def _reaches_with_graph(items: tuple[Item, ...], names: list[str], root: ast.AST) -> bool:
    """Whether ``names``, or a name computed from them with their graph, is read with its
    graph by anything but such an assignment: a loss, a ``backward()``, a call. A name
    rebound to a value read only inside ``.detach()`` carries no graph (SAC's
    ``next_q = r + g * target_v`` used as ``next_q.detach()``; TD3's
    ``target_q = reward + (not_done * gamma * target_q).detach()``; QMIX's targets built
    by a helper from the target network's values, detached where they enter the loss).
    A loop of ``root`` drawing from them (``for nq, q in zip(next_qs, qs)``) carries
    only the loop names its elements bind, followed through the loop's body (MAAC's
    per-agent targets)."""
    inside = {
        id(node)
        for item in items
        if isinstance(item.node, ast.stmt)
        for node in ast.walk(item.node)
    }
    carried = set(names)
    for item in items:
        statement = item.node
        if not isinstance(statement, ast.stmt) and id(statement) in inside:
            continue
        if _carry_through(statement, carried):
            if not carried:
                return False
            continue
        if not any(_reads_with_graph(statement, held) for held in carried):
            continue
        loop = _loop_drawing_from(root, statement)
        if loop is None:
            return True
        inside.update(id(node) for node in ast.walk(loop.iter))
        carried.update(_drawn_names(loop, carried))
        if _block_reads_with_graph(loop.body + loop.orelse, carried):
            return True
    return False


def _carry_through(statement: ast.AST, carried: set[str]) -> bool:
    """For an assignment to plain names: carry them on when the value reads a carried
    name with its graph, drop them when a plain ``=`` does not; whether it was one."""
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
        target = statement.targets[0]
    elif isinstance(statement, ast.AugAssign):
        target = statement.target
    else:
        return False
    bound = _names(target)
    if not bound:
        return False
    if any(_reads_with_graph(statement.value, held) for held in carried):
        carried.update(bound)
    elif isinstance(statement, ast.Assign):
        carried.difference_update(bound)
    return True


def _block_reads_with_graph(statements: list[ast.stmt], carried: set[str]) -> bool:
    """:func:`_reaches_with_graph` over the statements of a loop's body, nested blocks
    in order (a loop's body holds no items of the body around it)."""
    for statement in statements:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if _carry_through(statement, carried):
            continue
        if isinstance(statement, (ast.For, ast.AsyncFor)):
            if any(_reads_with_graph(statement.iter, held) for held in carried):
                carried.update(_drawn_names(statement, carried))
            heads: list[ast.AST] = []
            blocks = [statement.body, statement.orelse]
        elif isinstance(statement, (ast.If, ast.While)):
            heads, blocks = [statement.test], [statement.body, statement.orelse]
        elif isinstance(statement, (ast.With, ast.AsyncWith)):
            heads, blocks = [w.context_expr for w in statement.items], [statement.body]
        elif isinstance(statement, ast.Try):
            heads = []
            blocks = [statement.body, statement.orelse, statement.finalbody]
            blocks += [handler.body for handler in statement.handlers]
        else:
            heads, blocks = [statement], []
        if any(_reads_with_graph(head, held) for head in heads for held in carried):
            return True
        if any(_block_reads_with_graph(block, carried) for block in blocks):
            return True
    return False


def _loop_drawing_from(root: ast.AST, node: ast.AST) -> ast.For | ast.AsyncFor | None:
    """The loop of ``root`` whose iterable holds ``node`` (``zip(next_qs, qs)``)."""
    for loop in ast.walk(root):
        if isinstance(loop, (ast.For, ast.AsyncFor)) and _holds(loop.iter, node):
            return loop
    return None


def _drawn_names(loop: ast.For | ast.AsyncFor, carried: set[str]) -> set[str]:
    """The loop names bound from carried values: per element of a ``zip`` or
    ``enumerate`` unpacked in place, else every name of the loop's target."""
    pairs = element_pairs(loop.target, loop.iter)
    if pairs is None:
        pairs = [(loop.iter, loop.target)]
    return {
        node.id
        for source, element in pairs
        if any(_reads_with_graph(source, held) for held in carried)
        for node in ast.walk(element)
        if isinstance(node, ast.Name)
    }


def _reads_with_graph(node: ast.AST, name: str) -> bool:
    """Whether ``node`` reads ``name`` outside every ``.detach()``'s receiver."""
    stack = [node]
    while stack:
        inner = stack.pop()
        if (
            isinstance(inner, ast.Call)
            and isinstance(inner.func, ast.Attribute)
            and inner.func.attr in ("detach", "detach_")
        ):
            stack += [*inner.args, *(k.value for k in inner.keywords)]
            continue
        if isinstance(inner, ast.Name) and inner.id == name and isinstance(inner.ctx, ast.Load):
            return True
        stack += list(ast.iter_child_nodes(inner))
    return False


def _root_text(ctx: FileContext, expr: ast.expr) -> str:
    while (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Attribute)
        and expr.func.attr in ("to", "cuda", "eval", "train")
    ):
        expr = expr.func.value
    return ctx.segment(expr)


def _mentions(source: str, text: str) -> bool:
    """Whether ``text`` appears in ``source`` as a whole name (``ema`` is not in ``schema``)."""
    return re.search(rf"(?<![\w.]){re.escape(text)}(?!\w)", source) is not None
