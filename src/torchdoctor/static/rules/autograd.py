"""Autograd rules that need only one place: TD202, TD206, TD207.

The loop-order rules (TD201, TD203, TD204, TD205) live in :mod:`.loop_order`.
"""

from __future__ import annotations

import ast
import re
from typing import cast

from torchdoctor.findings import Applicability, Confidence, Depth, Fix, Severity
from torchdoctor.rules.detectors import detector
from torchdoctor.static import torchapi
from torchdoctor.static.analysis.calls import last_name, root_name
from torchdoctor.static.bindings import BindingKind
from torchdoctor.static.branches import exclusive, spans
from torchdoctor.static.context import FileContext
from torchdoctor.static.grad_mode import grad_disabled_by
from torchdoctor.static.rules.base import LintRule
from torchdoctor.static.structure import Frame, FrameKind, FunctionScope, Item, ModuleScope
from torchdoctor.static.training import EventKind, classify


@detector("TD202", depth=Depth.LINT)
class BackwardUnderNoGrad(LintRule):
    """``loss.backward()`` where the loss was computed with autograd switched off."""

    requires = ("backward",)
    call_names = frozenset({"backward"})

    def visit_call(self, node: ast.Call) -> None:
        ctx = self.ctx
        frames = ctx.frames  # the blocks around this call, as the walk stands now
        event = classify(ctx, Item(node, frames), ctx.function)
        if event is None or event.kind is not EventKind.BACKWARD:
            return
        disabler = grad_disabled_by(ctx, frames)
        if disabler is None or not self._built_inside(event.target, disabler):
            return
        what = (
            ctx.segment(disabler.items[0].context_expr)
            if isinstance(disabler, (ast.With, ast.AsyncWith))
            else "@" + ctx.segment(disabler)
        )
        place = getattr(disabler, "lineno", 0)
        self.report(
            node,
            f"`{ctx.segment(node.func)}()` at line {node.lineno} runs under `{what}` (line "
            f"{place}), and the loss was computed under it too: it has no graph, so the "
            'first step dies with "element 0 of tensors does not require grad and does '
            'not have a grad_fn"',
            fix_hint=f"Move the forward pass and `backward()` out of `{what}`; keep "
            "`no_grad`/`inference_mode` for evaluation only.",
            evidence={"disabled_at": place},
        )

    def _built_inside(self, loss: ast.expr | None, disabler: ast.AST) -> bool:
        """Whether the loss was computed inside the grad-disabled region. A loss built
        outside and only backpropagated inside ``no_grad`` works: autograd's backward
        does not record a graph, so it is not affected."""
        if isinstance(disabler, (ast.With, ast.AsyncWith)):
            region = (disabler.lineno, disabler.end_lineno or disabler.lineno)
        elif self.ctx.function is not None:
            node = self.ctx.function.node
            region = (node.lineno, node.end_lineno or node.lineno)
        else:
            return False
        if loss is None:
            return False
        if not isinstance(loss, ast.Name):
            return True  # criterion(model(x), y).backward(): computed right here
        binding = self.ctx.binding(loss)
        if binding is None or binding.kind is not BindingKind.ASSIGN:
            return False  # a parameter or loop variable: built by the caller
        line = binding.position[0]
        if not region[0] <= line <= region[1]:
            return False
        return self._computed_without_grad(binding.node, disabler)

    def _computed_without_grad(self, statement: ast.AST, disabler: ast.AST) -> bool:
        """Whether autograd is still off where ``statement`` (inside ``disabler``'s region)
        runs: an ``enable_grad()``/``set_grad_enabled(True)`` block around it, nested in the
        region, turns it back on, and a loss computed there has a graph even though its
        ``backward()`` runs after the block (PINNacle's ``@torch.no_grad()`` optimizer
        steps compute their losses under ``enable_grad``)."""
        frames = self.ctx.frames
        root = (
            disabler
            if isinstance(disabler, (ast.With, ast.AsyncWith))
            else getattr(self.ctx.function, "node", None)
        )
        index = next((i for i, frame in enumerate(frames) if frame.node is root), None)
        if root is None or index is None:
            return True
        withs = _withs_around(root, statement)
        if withs is None:
            return True  # not found below the region's root: keep the line's verdict
        inner = frames[: index + 1] + tuple(Frame(FrameKind.WITH, node) for node in withs)
        return grad_disabled_by(self.ctx, inner) is not None


def _withs_around(root: ast.AST, statement: ast.AST) -> list[ast.With | ast.AsyncWith] | None:
    """The ``with`` statements between ``root`` (a ``with`` block or a function) and
    ``statement`` in its body, outermost first; ``None`` when ``statement`` is not in it.
    Functions and classes defined inside are not entered: their bodies run elsewhere."""
    stack: list[tuple[ast.AST, tuple[ast.With | ast.AsyncWith, ...]]] = [
        (child, ()) for child in reversed(getattr(root, "body", []))
    ]
    while stack:
        node, withs = stack.pop()
        if node is statement:
            return list(withs)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(node, (ast.With, ast.AsyncWith)):
            withs = (*withs, node)
        for child in reversed(list(ast.iter_child_nodes(node))):
            if isinstance(child, (ast.stmt, ast.excepthandler, ast.match_case)):
                stack.append((child, withs))
    return None


@detector("TD206", depth=Depth.LINT)
class ForwardCalledDirectly(LintRule):
    """``model.forward(x)`` on an ``nn.Module``: forward hooks and wrappers are skipped."""

    requires = ("forward",)
    call_names = frozenset({"forward"})
    # Whether the file hooks every module, and the last names of the modules it hooks.
    _hooks: _Hooked | None = None

    def visit_call(self, node: ast.Call) -> None:
        func = node.func
        if not isinstance(func, ast.Attribute):
            return
        receiver = func.value
        if isinstance(receiver, ast.Call) or self._inside_own_forward(receiver):
            return  # super().forward(x), or a module's own forward calling self.forward
        found = self.ctx.family_of(receiver)
        if found is None or found[0] != torchapi.MODULE:
            return
        name = self.ctx.segment(receiver)
        known = found[1] is Confidence.HIGH or self._trains_here()
        if not known and not _used_as_a_module(self.ctx.source, name):
            return  # only its name says module (an OpenCV net, a camera model): stay quiet
        # The fix rewrites `x.forward(...)` to `x(...)`, which breaks an object that is not
        # callable: offered only where its class, or training on its output, shows it is a
        # module.
        fix = (
            Fix(
                f"Call `{name}(...)` instead of `{name}.forward(...)`",
                (self.ctx.replace(func, name),),
                Applicability.UNSAFE,
            )
            if known
            else None
        )
        # Skipping `__call__` skips only the hooks on this very module: its layers are still
        # called through theirs. A warning where the file attaches one to a module of this
        # name (or uses something that hooks every module), information elsewhere.
        hooked = self._hooked(receiver)
        words = _code_words(self.ctx)
        if hooked:
            note = ""
        elif _ENGINES.search(words) is not None:
            note = (
                f"; this file uses an engine that may hook the modules it is handed "
                f"(DeepSpeed ZeRO-3, quantization observers), but nothing here shows `{name}` "
                "is one of them"
            )
        elif _HOOKS.search(words) is None:
            note = "; this file attaches no hook, so today it computes the same"
        else:
            note = (
                f"; the hooks this file attaches are not shown to be on `{name}` itself (hooks "
                "on its layers still run, its forward calls them), so today it computes the same"
            )
        self.report(
            node,
            f"`{name}.forward(...)` at line {node.lineno} calls the module's forward "
            "directly, skipping `__call__`: its forward hooks and pre-hooks do not run "
            "(activation monitors record nothing, pruning masks are not re-applied)" + note,
            fix_hint=f"Call the module: `{name}(...)`.",
            confidence=found[1],
            fix=fix,
            severity=None if hooked else Severity.INFO,
        )

    def _hooked(self, receiver: ast.expr) -> bool:
        """Whether the file attaches a hook that runs on ``receiver`` itself. A hook a
        class puts on ``self.<name>`` is on its own attribute: ``self.<name>`` in another
        class is another object (nvdiffrec's ``_MLP.net``, a Sequential it hooks, and
        ``MLPTexture3D.net``, the ``_MLP``)."""
        if self._hooks is None:
            self._hooks = _hooked_modules(self.ctx.tree, _code_words(self.ctx))
        everywhere, names, owned = self._hooks
        name = _last_name(receiver)
        if everywhere or name in names:
            return True
        function = self.ctx.function
        if (
            isinstance(receiver, ast.Attribute)
            and function is not None
            and function.owner is not None
            and isinstance(receiver.value, ast.Name)
            and receiver.value.id == function.self_name
        ):
            return any((cls, name) in owned for cls in self._class_chain(function.owner.node))
        return any(attribute == name for _, attribute in owned)

    def _class_chain(self, cls: ast.ClassDef) -> list[str]:
        """The class and its bases defined in this file (a base's hook on its own
        attribute is on the subclass's attribute too)."""
        chain: list[str] = []
        pending = [cls]
        while pending and len(chain) < 16:
            current = pending.pop()
            if current.name in chain:
                continue
            chain.append(current.name)
            for base in current.bases:
                found = self.ctx.local_class(_last_name(base) or "")
                if found is not None:
                    pending.append(found.node)
        return chain

    def _trains_here(self) -> bool:
        """The function around the call runs ``backward()``: what it calls ``.forward`` on
        is a model being trained."""
        function = self.ctx.function
        if function is None:
            return ".backward(" in self.ctx.source
        return any(
            isinstance(node, ast.Attribute) and node.attr == "backward"
            for node in ast.walk(function.node)
        )

    def _inside_own_forward(self, receiver: ast.expr) -> bool:
        function = self.ctx.function
        return (
            function is not None
            and isinstance(receiver, ast.Name)
            and receiver.id == function.self_name
        )


# What attaches forward hooks or pre-hooks to modules: registering one, and the utilities
# and wrappers that work through them (weight and spectral norm, pruning, quantization
# observers, sharded parameters gathered before each forward).
_HOOKS = re.compile(
    r"register_\w*hook|spectral_norm|weight_norm|\bprune\b|\bquantization\b|\bfully_shard\b"
    r"|FullyShardedDataParallel|\bdeepspeed\b|\baccelerate\b"
)

# Hooks that reach every module, the root included: global module hooks.
_HOOKS_EVERY_MODULE = re.compile(r"register_module_forward\w*hook")
# Engines that may hook the modules they are handed (DeepSpeed ZeRO-3 gathers parameters
# in pre-hooks on every module; eager quantization inserts observers as hooks). Their name
# in the file does not show that the module called here is one they were handed: a note,
# not proof. (FSDP's wrapper and accelerate's hooks run inside `forward` itself.)
_ENGINES = re.compile(r"\bdeepspeed\b|\bquantization\b")
# Calls that hook the module they are given (their first argument).
_HOOKING_FUNCTIONS = frozenset({"spectral_norm", "weight_norm", "fully_shard"})
# Iterating these yields the module itself first, then its descendants.
_SELF_AND_DESCENDANTS = frozenset({"modules", "named_modules"})


def _last_name(expr: ast.expr) -> str | None:
    """``model`` for ``model``, ``self.model`` and ``models["model"]``'s holder's name."""
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        return expr.attr
    if isinstance(expr, ast.Subscript):
        return _last_name(expr.value)
    return None


def _code_words(ctx: FileContext) -> str:
    """The identifiers the code uses (names, attributes, imported modules), one a line:
    what the hook patterns are matched against, so that a comment or docstring about
    "quantization" or "pruning" attaches no hook. Read once per file."""
    key = ("TD206", "code-words")
    cached = ctx.memo.get(key)
    if cached is None:
        words: set[str] = set()
        for node in ast.walk(ctx.tree):
            if isinstance(node, ast.Name):
                words.add(node.id)
            elif isinstance(node, ast.Attribute):
                words.add(node.attr)
            elif isinstance(node, ast.alias):
                words.add(node.name)
            elif isinstance(node, ast.ImportFrom) and node.module:
                words.add(node.module)
        cached = ctx.memo[key] = "\n".join(sorted(words))
    return cast("str", cached)


_Hooked = tuple[bool, frozenset[str], frozenset[tuple[str, str]]]


def _hooked_modules(tree: ast.Module, words: str) -> _Hooked:
    """Whether the file attaches hooks to every module, the last names of the modules it
    hooks, and the ``(class, attribute)`` pairs a class hooks on its own ``self.<attr>``:
    the receiver of ``register_*hook``, the module given to weight or spectral norm or
    to pruning; for a loop variable, the module whose ``modules()`` it walks (the module
    itself comes first). A loop over ``children()``, a list of layers or anything else
    names no module here: its hooks are on layers the module's forward still calls."""
    if _HOOKS.search(words) is None:
        return False, frozenset(), frozenset()
    if _HOOKS_EVERY_MODULE.search(words) is not None:
        return True, frozenset(), frozenset()
    in_class: dict[int, str] = {}  # a call's innermost class (ast.walk: outer ones first)
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            in_class.update((id(inner), node.name) for inner in ast.walk(node))
    owned: set[tuple[str, str]] = set()
    loops: dict[str, list[ast.expr]] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            for target in ast.walk(node.target):
                if isinstance(target, ast.Name):
                    loops.setdefault(target.id, []).append(node.iter)
    names: set[str] = set()

    def add(hooked: ast.expr, call: ast.Call) -> None:
        if (
            isinstance(hooked, ast.Attribute)
            and isinstance(hooked.value, ast.Name)
            and hooked.value.id == "self"
            and id(call) in in_class
        ):
            owned.add((in_class[id(call)], hooked.attr))
            return
        if isinstance(hooked, ast.Name) and hooked.id in loops:
            for walked in loops[hooked.id]:
                if (
                    isinstance(walked, ast.Call)
                    and isinstance(walked.func, ast.Attribute)
                    and walked.func.attr in _SELF_AND_DESCENDANTS
                ):
                    names.add(_last_name(walked.func.value) or "")
            return
        names.add(_last_name(hooked) or "")

    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if isinstance(func, ast.Attribute) and re.fullmatch(r"register_\w*hook", called):
            add(func.value, node)
        elif node.args and (
            called in _HOOKING_FUNCTIONS
            or (isinstance(func, ast.Attribute) and _last_name(func.value) == "prune")
        ):
            add(node.args[0], node)
    names.discard("")
    return False, frozenset(names), frozenset(owned)


_MODULE_METHODS = (
    "parameters",
    "named_parameters",
    "modules",
    "children",
    "state_dict",
    "load_state_dict",
    "train",
    "eval",
    "zero_grad",
    "requires_grad_",
    "register_forward_hook",
)


def _used_as_a_module(source: str, name: str) -> bool:
    """The file calls a method on ``name`` that only an ``nn.Module`` has."""
    return any(f"{name}.{method}(" in source for method in _MODULE_METHODS)


@detector("TD207", depth=Depth.LINT)
class ParameterDataMutated(LintRule):
    """A tensor changed in place through ``.data`` between the forward pass and
    ``backward()``: autograd cannot see it and computes gradients from the changed value."""

    requires = (".data",)
    needs_structure = True

    def leave_function(self, function: FunctionScope) -> None:
        self._check(function.items, function)
        if function.name == "forward" and function.self_name is not None:
            self._check_forward(function)

    def _check_forward(self, function: FunctionScope) -> None:
        """Inside a module's ``forward``: an activation computed there (``attn =
        softmax(...)``) changed through ``.data`` before it is used on; the ops that saved
        it for backward compute their gradients from the changed values, unseen."""
        ctx = self.ctx
        for item in function.items:
            tensor = _data_mutation(item.node)
            if not isinstance(tensor, ast.Name) or grad_disabled_by(ctx, item.frames):
                continue
            binding = ctx.binding(tensor, function)
            value = binding.value if binding is not None else None
            if (
                binding is None
                or binding.kind is not BindingKind.ASSIGN
                or not isinstance(value, ast.Call)
                or not _saves_its_output(value)
                or getattr(binding.node, "lineno", item.line) >= item.line
            ):
                continue  # only an output autograd kept is read back wrong
            name = tensor.id
            self.report(
                item.node,
                f"`{ctx.segment(item.node)}` at line {item.line} changes `{name}`, computed "
                f"at line {value.lineno} in `forward`, through `.data`: autograd does not see "
                f"the change, so the operations that saved `{name}` (or used it) compute "
                "their gradients from values that no longer match, silently wrong",
                fix_hint=f"Make the change out of place, in the graph: `{name} = "
                f"{name}.masked_fill(mask, value)` (or `torch.where`), without `.data`.",
            )

    def leave_module(self, module: ModuleScope) -> None:
        self._check(module.items, None)

    def _check(self, items: list[Item], scope: FunctionScope | None) -> None:
        ctx = self.ctx
        if not any(_data_mutation(item.node) is not None for item in items):
            return  # the common case: nothing to classify
        backward_targets = set()
        kinds: list[EventKind | None] = []
        targets: list[ast.expr | None] = []
        for item in items:
            event = classify(ctx, item, scope)
            kinds.append(event.kind if event else None)
            targets.append(event.target if event else None)
            if event and event.kind is EventKind.BACKWARD and isinstance(event.target, ast.Name):
                backward_targets.add(event.target.id)
        forward_line = 0
        called: set[str] = set()  # the models run forward since the last backward
        read: set[str] = set()  # the names read since the forward pass began
        # the last statement that bound names to new memory, whose calls come after it
        rebinding: ast.Assign | None = None
        for index, item in enumerate(items):
            kind = kinds[index]
            if kind is EventKind.BACKWARD:
                forward_line = 0
                called = set()
                read = set()
            elif kind is EventKind.FORWARD or _assigns(item.node, backward_targets):
                forward_line = forward_line or item.line
                target = targets[index]
                if kind is EventKind.FORWARD and target is not None:
                    called.add(ctx.segment(target))
                read |= _names_read(item.node)
            elif forward_line:
                mutated = _data_mutation(item.node)
                if mutated is None or grad_disabled_by(ctx, item.frames) is not None:
                    if rebinding is not None and spans(rebinding, item.node):
                        continue  # a call of that statement: its reads came with it
                    read |= _names_read(item.node)
                    fresh = _bound_to_new_memory(item.node)
                    if fresh:
                        read -= fresh
                        rebinding = cast("ast.Assign", item.node)
                    continue
                owner = self._owner(mutated, scope)
                if owner is not None and called and owner not in called:
                    continue  # another model's parameters: not in this graph
                if owner is None and root_name(mutated) not in read:
                    continue  # `noise.data.normal_()` before the forward that reads it
                # The backward that may follow in the same pass: one on the other side of
                # an `if` (GradNorm's renormalisation vs. a plain step) never does.
                backward = next(
                    (
                        items[i]
                        for i in range(index + 1, len(items))
                        if kinds[i] is EventKind.BACKWARD and not exclusive(ctx, item, items[i])
                    ),
                    None,
                )
                if backward is not None:
                    self._report(item, mutated, forward_line, backward)

    def _owner(self, tensor: ast.expr, scope: FunctionScope | None) -> str | None:
        """The model whose parameter ``tensor`` is, when the code shows it: ``p`` of ``for
        p in teacher.parameters()``, or the module in ``self.teacher.weight``."""
        ctx = self.ctx
        if isinstance(tensor, ast.Name):
            binding = ctx.binding(tensor, scope)
            loop = binding.node if binding is not None else None
            if not (
                binding is not None
                and binding.kind is BindingKind.LOOP_TARGET
                and isinstance(loop, ast.For)
            ):
                return None
            source = loop.iter
            while isinstance(source, ast.Call) and isinstance(source.func, ast.Attribute):
                if source.func.attr in _PARAMETER_SOURCES:
                    return ctx.segment(source.func.value)
                source = source.func.value
            return None
        while isinstance(tensor, ast.Attribute):
            tensor = tensor.value
            found = ctx.family_of(tensor, scope)
            if found is not None and found[0] == torchapi.MODULE:
                return ctx.segment(tensor)
        return None

    def _report(self, item: Item, tensor: ast.expr, forward_line: int, backward: Item) -> None:
        ctx = self.ctx
        name = ctx.segment(tensor)
        self.report(
            item.node,
            f"`{ctx.segment(item.node)}` at line {item.line} changes `{name}` through "
            f"`.data` after the forward pass (line {forward_line}) and before "
            f"`{ctx.segment(backward.node)}` (line {backward.line}): autograd does not see "
            "the change and computes gradients from the modified values, silently wrong",
            fix_hint=f"Change `{name}` after `backward()`/`step()` (or before the forward "
            f"pass) inside `with torch.no_grad():`, without `.data`, so autograd "
            "can detect a conflicting in-place change.",
            evidence={"forward_line": forward_line, "backward_line": backward.line},
        )


# Operations whose backward reads their own output (softmax, sigmoid...): changing that
# output through `.data` changes the gradient. A linear layer's or a sum's output is not
# kept, so a masked_fill_ through `.data` there (Tacotron 2's attention energies) is harmless.
_SAVE_OUTPUT = frozenset(
    {"softmax", "log_softmax", "sigmoid", "tanh", "exp", "relu", "elu", "sqrt", "rsqrt"}
)


def _saves_its_output(call: ast.Call) -> bool:
    """``torch.softmax(...)``, ``F.sigmoid(...)``, ``x.exp()``: the output is saved."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return name in _SAVE_OUTPUT


_PARAMETER_SOURCES = frozenset({"parameters", "named_parameters", "buffers", "state_dict"})


def _names_read(node: ast.AST) -> set[str]:
    """The names a statement or call reads."""
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


# Wrappers that hand back the tensor they are given (new memory when it is computed).
_WRAPPERS = frozenset({"Variable", "Parameter", "tensor", "as_tensor"})


def _bound_to_new_memory(node: ast.AST) -> set[str]:
    """The names an assignment binds to a tensor in new memory: arithmetic (``x = a +
    noise``), also wrapped or chained (SABR's ``X_pgd = Variable(X_pgd.data + noise,
    requires_grad=True)``, ``(x + noise).requires_grad_()``), or a ``.clone()``. What the
    forward pass used under that name is another tensor, which a later ``.data`` write
    does not touch; a view (``x = x.view(...)``, ``x.detach()``) shares the memory and is
    not counted."""
    if not isinstance(node, ast.Assign) or not _new_memory(node.value):
        return set()
    return {t.id for t in node.targets if isinstance(t, ast.Name)}


def _new_memory(value: ast.expr) -> bool:
    """``value`` computes its tensor (arithmetic, ``.clone()``) under any chain of methods
    or wrappers, rather than viewing one that exists."""
    while True:
        if isinstance(value, ast.BinOp):
            return True
        if not isinstance(value, ast.Call):
            return False
        func = value.func
        if isinstance(func, ast.Attribute):
            if func.attr == "clone":
                return True
            value = func.value
        elif last_name(func) in _WRAPPERS and value.args:
            value = value.args[0]
        else:
            return False


def _assigns(node: ast.AST, names: set[str]) -> bool:
    """Whether ``node`` computes one of the backpropagated ``names``; an accumulator set
    to a number (``loss_swap = 0.0`` before the losses are summed into it) starts no
    forward pass."""
    if isinstance(node, ast.Assign) and not isinstance(node.value, ast.Constant):
        return any(isinstance(t, ast.Name) and t.id in names for t in node.targets)
    return False


def _data_mutation(node: ast.AST) -> ast.expr | None:
    """The tensor whose ``.data`` a statement or call changes in place, if it does."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        method = node.func.attr
        if method.endswith("_") and not method.startswith("_"):
            return _data_owner(node.func.value)
        return None
    targets: list[ast.expr] = []
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, ast.AugAssign):
        targets = [node.target]
    for target in targets:
        if isinstance(target, ast.Subscript):
            target = target.value
        owner = _data_owner(target)
        if owner is not None:
            return owner
    return None


def _data_owner(expr: ast.expr) -> ast.expr | None:
    """``p`` for ``p.data``, unless ``p`` is a gradient (``p.grad.data``)."""
    if not (isinstance(expr, ast.Attribute) and expr.attr == "data"):
        return None
    owner = expr.value
    if isinstance(owner, ast.Attribute) and owner.attr == "grad":
        return None
    return owner
