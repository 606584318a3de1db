"""Results thrown away: a tensor method whose result is dropped, a grad-mode call without
``with``.

TD224 tensor-result-discarded: ``x.to(device)``, ``x.cuda()``, ``x.detach()``, ``x.float()``
as a bare statement on a *tensor* (a module's ``.to()`` works in place and stays quiet);
TD225 grad-mode-call-without-with: ``torch.no_grad()`` as a bare statement.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Callable
from typing import cast

from torchdoctor.findings import Applicability, Depth, Finding, Fix, Severity
from torchdoctor.rules.detectors import detector
from torchdoctor.static import torchapi
from torchdoctor.static.analysis.callers import passed_values
from torchdoctor.static.analysis.calls import last_name
from torchdoctor.static.analysis.dataloader import iterated, loader_of
from torchdoctor.static.analysis.paths import is_test_path
from torchdoctor.static.bindings import BindingKind
from torchdoctor.static.context import FileContext, Scope
from torchdoctor.static.names import own_nodes, returns_of
from torchdoctor.static.rules.base import LintRule
from torchdoctor.static.structure import FrameKind, FunctionScope, ModuleScope

__all__ = ["is_tensor"]

# Tensor methods that return a new tensor and leave their receiver unchanged.
_NOT_IN_PLACE = frozenset(
    {
        "to",
        "cuda",
        "cpu",
        "detach",
        "float",
        "half",
        "double",
        "bfloat16",
        "long",
        "int",
        "bool",
        "contiguous",
        "clone",
        "pin_memory",
        "type",
        "view",
        "reshape",
        "squeeze",
        "unsqueeze",
        "permute",
        "transpose",
        "t",
        "flatten",
        "add",
        "sub",
        "mul",
        "div",
        "clamp",
        "abs",
        "sqrt",
        "exp",
        "log",
        "neg",
        "fill",
        "requires_grad",
    }
)
# A fix that only rebinds the name keeps what the line meant to do.
_SAFE_REBIND = frozenset(
    {
        "to",
        "cuda",
        "cpu",
        "float",
        "half",
        "double",
        "bfloat16",
        "long",
        "int",
        "bool",
        "contiguous",
        "pin_memory",
    }
)
# torch functions whose result is always a tensor.
_TENSOR_FACTORIES = torchapi.TENSOR_RESULTS
_GRAD_SCOPES = torchapi.GRAD_SCOPES
_GRAD_NAMES = frozenset(name.rpartition(".")[2] for name in _GRAD_SCOPES)


def is_tensor(ctx: FileContext, expr: ast.expr, scope: Scope) -> bool:
    """Whether the file shows that ``expr`` is a tensor: built by a torch tensor factory,
    annotated ``torch.Tensor``, or unpacked from the batches of a ``DataLoader``."""
    type_name = ctx.instance_type(expr, scope)
    if type_name is not None:
        return type_name in _TENSOR_FACTORIES
    if not isinstance(expr, ast.Name):
        return False
    found = ctx.lookup(expr, scope)
    if (
        found is not None
        and found[0].kind is BindingKind.UNPACKED
        and isinstance(found[0].value, ast.Name)
    ):  # inputs, labels = batch; batch from a loader
        return _loop_batch(ctx, found[0].value, found[1], whole=True)
    return _loop_batch(ctx, expr, scope, whole=False)


def _loop_batch(ctx: FileContext, expr: ast.Name, scope: Scope, *, whole: bool) -> bool:
    """Whether ``expr`` is an element unpacked in ``for x, y in loader`` (``whole``: or
    the batch itself, ``for batch in loader``, when the caller unpacks it further)."""
    found = ctx.lookup(expr, scope)
    if found is None or found[0].kind is not BindingKind.LOOP_TARGET:
        return False
    loop = found[0].node
    if not isinstance(loop, (ast.For, ast.AsyncFor)):
        return False
    target = loop.target
    scope = found[1]
    if _enumerated(ctx, loop.iter, scope):
        if not isinstance(target, ast.Tuple) or len(target.elts) != 2:
            return False
        target = target.elts[1]  # for i, batch in enumerate(loader): batch is whole
    plain = isinstance(target, ast.Name) and target.id == expr.id
    if not (_unpacked(target, expr.id) or (whole and plain)):
        return False
    loader = loader_of(ctx, loop.iter, scope)
    if loader is not None:
        return not _collates_itself(loader)
    source = iterated(ctx, loop.iter, scope)
    if _a_choice_collates_itself(ctx, source, scope):
        return False
    if isinstance(source, ast.Name) and any(
        (built := loader_of(ctx, value, caller)) is not None and _collates_itself(built)
        for value, caller, _ in passed_values(ctx, source, scope)
    ):
        return False
    if isinstance(source, ast.Call):
        function = ctx.resolve_local_call(source, scope)
        returns = function.node.returns if function is not None else None
        name = None if returns is None else ctx.qualified_name(returns)
        return name is not None and torchapi.in_family(name, torchapi.DATALOADER)
    return ctx.is_in_family(source, torchapi.DATALOADER, scope)


def _enumerated(ctx: FileContext, iterable: ast.expr, scope: Scope) -> bool:
    """``enumerate(loader)``, also inside a progress bar (``tqdm(enumerate(loader))``,
    fairchem's evaluation loop): each item is an index and a whole batch."""
    while isinstance(iterable, ast.Call) and iterable.args:
        func = iterable.func
        if isinstance(func, ast.Name) and func.id == "enumerate":
            return True
        if iterated(ctx, iterable, scope) is iterable:
            return False
        iterable = iterable.args[0]
    return False


def _a_choice_collates_itself(ctx: FileContext, source: ast.expr, scope: Scope) -> bool:
    """The loop's loader is a choice between loaders (``loader = self.val_loader if split
    == "val" else self.test_loader``) one of which this file builds with its own
    ``collate_fn``, directly or in a method of the file that returns it (fairchem's
    ``get_dataloader``, annotated ``-> DataLoader``, collates graphs)."""
    if isinstance(source, ast.Name):
        found = ctx.lookup(source, scope)
        if found is None or not isinstance(found[0].value, ast.IfExp):
            return False
        choice, scope = found[0].value, found[1]
    elif isinstance(source, ast.IfExp):
        choice = source
    else:
        return False
    return any(_built_collating(ctx, branch, scope, 0) for branch in (choice.body, choice.orelse))


def _built_collating(ctx: FileContext, expr: ast.expr, scope: Scope, depth: int) -> bool:
    if depth > 3:
        return False
    if isinstance(expr, (ast.Name, ast.Attribute)):
        found = (
            ctx.lookup(expr, scope)
            if isinstance(expr, ast.Name)
            else ctx.attribute_binding(expr, scope)
        )
        if found is None or found[0].value is None:
            return False
        expr, scope = found[0].value, found[1]
    if not isinstance(expr, ast.Call):
        return False
    if ctx.is_call_to(expr, torchapi.DATALOADER, scope=scope):
        return _collates_itself(expr)
    function = ctx.resolve_local_call(expr, scope)
    return function is not None and any(
        r.value is not None and _built_collating(ctx, r.value, function, depth + 1)
        for r in returns_of(function.node)
    )


def _collates_itself(loader: ast.Call) -> bool:
    """``DataLoader(..., collate_fn=batcher())``: its batches are whatever the function
    builds (a batched graph, a dict of lists), not shown to be tensors."""
    return any(
        keyword.arg == "collate_fn"
        and not (isinstance(keyword.value, ast.Constant) and keyword.value.value is None)
        and last_name(keyword.value) != "default_collate"
        for keyword in loader.keywords
    )


def _unpacked(target: ast.expr, name: str) -> bool:
    """``x`` in ``for x, y in ...`` or ``for i, (x, y) in ...`` (not a whole batch)."""
    if not isinstance(target, (ast.Tuple, ast.List)):
        return False
    for element in target.elts:
        if isinstance(element, ast.Name) and element.id == name:
            return True
        if isinstance(element, (ast.Tuple, ast.List)) and _unpacked(element, name):
            return True
    return False


# torch functions with no effect but their result (no RNG, no ``out=``/``inplace=True``
# use), often written as if they changed their first argument: `torch.clamp(w, 0)`.
# Heavy kernels (matmul, conv) are left out: benchmarks call them bare to time them.
_PURE_FUNCTIONS = frozenset(
    [
        *(
            f"torch.{name}"
            for name in (
                "clamp",
                "clip",
                "clamp_min",
                "clamp_max",
                "sigmoid",
                "tanh",
                "relu",
                "abs",
                "exp",
                "log",
                "sqrt",
                "neg",
                "round",
                "floor",
                "ceil",
                "squeeze",
                "unsqueeze",
                "flatten",
                "reshape",
                "transpose",
                "permute",
                "softmax",
                "log_softmax",
                "detach",
                "clone",
                "add",
                "sub",
                "mul",
                "div",
                "masked_fill",
                "nan_to_num",
                "flip",
                "roll",
            )
        ),
        *(
            f"torch.nn.functional.{name}"
            for name in (
                "relu",
                "leaky_relu",
                "elu",
                "gelu",
                "silu",
                "sigmoid",
                "tanh",
                "softmax",
                "log_softmax",
                "normalize",
                "pad",
                "interpolate",
                "one_hot",
            )
        ),
    ]
)
# Their last names: a method call named otherwise (most statements) is neither kind.
_PURE_LAST_NAMES = frozenset(name.rpartition(".")[2] for name in _PURE_FUNCTIONS)
# Blocks that call a function for the exception or warning it raises, not its result.
_EXPECTING = ("raises", "Raises", "warns", "Warns")


@detector("TD224", depth=Depth.LINT)
class TensorResultDiscarded(LintRule):
    """``x.to(device)`` as a statement, with ``x`` a tensor: the copy is dropped."""

    def __init__(self, ctx: FileContext, sink: Callable[[Finding], None]) -> None:
        super().__init__(ctx, sink)
        self._candidates: list[tuple[ast.Expr, ast.Call, ast.Name | ast.Attribute, Scope]] = []

    def visit_Expr(self, node: ast.Expr) -> None:
        call = node.value
        if not isinstance(call, ast.Call):
            return
        func = call.func
        if (
            isinstance(func, ast.Attribute)
            and func.attr not in _NOT_IN_PLACE
            and func.attr not in _PURE_LAST_NAMES
        ):
            return  # `logger.info(...)`: the attribute is the qualified name's last part
        if (
            isinstance(func, ast.Name)
            and func.id not in _PURE_LAST_NAMES
            and func.id not in self.ctx.imports
        ):
            return  # `print(...)`, a local helper: no name of torch's
        if not isinstance(call.func, ast.Attribute) or self.ctx.qualified_name(call.func):
            self._check_function(node, call)
            return
        method = call.func.attr
        if method not in _NOT_IN_PLACE:
            return
        receiver = call.func.value
        if not isinstance(receiver, (ast.Name, ast.Attribute)):
            return
        ctx = self.ctx
        if ctx.qualified_name(call.func) is not None or ctx.is_in_family(receiver, torchapi.MODULE):
            return
        # Decided once the file is walked: a loader passed in from a caller is followed there.
        self._candidates.append((node, call, receiver, ctx.function))

    def leave_module(self, module: ModuleScope) -> None:
        dropped = {id(receiver) for _, _, receiver, _ in self._candidates}
        for node, call, receiver, scope in self._candidates:
            if is_tensor(self.ctx, receiver, scope):
                unread = _never_read(self.ctx, receiver, scope, dropped)
                self._report(node, call, receiver, unread)

    def _report(
        self, node: ast.Expr, call: ast.Call, receiver: ast.Name | ast.Attribute, unread: bool
    ) -> None:
        ctx = self.ctx
        method = cast("ast.Attribute", call.func).attr
        name = ctx.segment(receiver)
        text = ctx.segment(call)
        fix = None
        if isinstance(receiver, ast.Name) and "\n" not in text:
            fix = Fix(
                f"Assign the result: `{name} = {text}`",
                (ctx.replace(node, f"{name} = {text}"),),
                Applicability.SAFE if method in _SAFE_REBIND else Applicability.UNSAFE,
            )
        message = (
            f"`{text}` at line {node.lineno} returns a new tensor and the result is thrown "
            f"away: `{name}` itself is unchanged (a tensor's `.{method}()` is not in place, "
            "unlike a module's `.to()`)"
        )
        if unread:
            # param's GEMM benchmarks: `c.to("cpu")` after the timer, `c` never read again
            message += f"; nothing reads `{name}` afterwards, so no result changes"
        self.report(
            node,
            message,
            severity=Severity.INFO if unread else None,
            fix_hint=f"Assign the result: `{name} = {text}`.",
            fix=fix,
        )

    def _check_function(self, node: ast.Expr, call: ast.Call) -> None:
        """``torch.clamp(w, 0)`` as a statement: a pure function whose result is dropped."""
        ctx = self.ctx
        qualified = ctx.qualified_name(call.func)
        if qualified not in _PURE_FUNCTIONS or not call.args:
            return
        target = call.args[0]
        if not isinstance(target, (ast.Name, ast.Attribute, ast.Subscript)):
            return
        if any(k.arg in ("out", "inplace") for k in call.keywords) or self._expecting():
            return
        if is_test_path(ctx.project_path or os.path.basename(ctx.path)):
            return  # tests call operators for their errors and side effects on purpose
        name, text = ctx.segment(target), ctx.segment(call)
        short = qualified.rpartition(".")[2]
        self.report(
            node,
            f"`{text}` at line {node.lineno} returns a new tensor and the result is thrown "
            f"away: `{name}` itself is unchanged (`{short}` is not in place)",
            fix_hint=f"Assign the result (`{name} = {text}`), or change the tensor in place "
            f"(for a parameter, under `torch.no_grad()`: `{name}.{short}_(...)`).",
        )

    def _expecting(self) -> bool:
        """The statement sits in a ``try`` or a ``with pytest.raises(...)`` block."""
        for frame in self.ctx.frames:
            if frame.kind is FrameKind.TRY:
                return True
            if frame.kind is FrameKind.WITH:
                items = cast("ast.With", frame.node).items
                if any(
                    isinstance(i.context_expr, ast.Call)
                    and any(w in last_name(i.context_expr.func) for w in _EXPECTING)
                    for i in items
                ):
                    return True
        return False


def _never_read(
    ctx: FileContext, receiver: ast.Name | ast.Attribute, scope: Scope, dropped: set[int]
) -> bool:
    """Whether the plain name ``receiver`` only ever holds results the code computes itself
    (every binding in its scope is ``name = <call>`` or ``None``: no parameter, no alias of another
    object a caller or attribute keeps), and nothing reads it in that scope (for a name
    the function declares ``global``, in the whole file) except statements that drop a
    copy of it (``dropped``: the ids of their receivers)."""
    if not isinstance(receiver, ast.Name):
        return False
    name = receiver.id
    if isinstance(scope, FunctionScope) and name in scope.parameter_names:
        return False
    if isinstance(scope, FunctionScope) and not _declares_global(scope.node, name):
        nodes = list(ast.walk(scope.node))
    else:
        nodes = _module_name_nodes(ctx.tree, name)
    fresh = {  # `c = torch.mm(a, b)`, or `c = None` before a first result
        id(target)
        for node in nodes
        if isinstance(node, ast.Assign)
        and (
            isinstance(node.value, ast.Call)
            or (isinstance(node.value, ast.Constant) and node.value.value is None)
        )
        for target in node.targets
    }
    named = [node for node in nodes if isinstance(node, ast.Name) and node.id == name]
    stores = [node for node in named if isinstance(node.ctx, ast.Store)]
    if not stores or any(id(store) not in fresh for store in stores):
        return False
    return not any(isinstance(n.ctx, ast.Load) and id(n) not in dropped for n in named)


def _declares_global(function: ast.AST, name: str) -> bool:
    return any(
        isinstance(node, (ast.Global, ast.Nonlocal)) and name in node.names
        for node in ast.walk(function)
    )


def _module_name_nodes(tree: ast.Module, name: str) -> list[ast.AST]:
    """The nodes where the module-level ``name`` may be read or bound: module-level code,
    and every function that declares it ``global`` or never binds a local of that name."""
    found = own_nodes(tree)
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        inner = own_nodes(function)
        binds = any(
            isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store) for n in inner
        ) or name in {a.arg for a in ast.walk(function.args) if isinstance(a, ast.arg)}
        if not binds or _declares_global(function, name):
            found += inner
    return found


@detector("TD225", depth=Depth.LINT)
class GradModeCallWithoutWith(LintRule):
    """``torch.no_grad()`` as a bare statement: it builds a context manager and drops it."""

    requires = ("no_grad", "enable_grad", "inference_mode")

    def visit_Expr(self, statement: ast.Expr) -> None:
        node = statement.value
        if not isinstance(node, ast.Call):
            return
        func = node.func
        last = last_name(func)
        last = self.ctx.imports.get(last, last).rpartition(".")[2]  # import ... as alias
        if last not in _GRAD_NAMES or not self.ctx.is_call_to(node, *_GRAD_SCOPES):
            return
        text = self.ctx.segment(node)
        self.report(
            node,
            f"`{text}` at line {node.lineno} is called as a statement: it only builds a "
            "context manager, so autograd stays exactly as it was and the code below still "
            "records a graph",
            fix_hint=f"Use it as a block: `with {text}:` around the code it should cover (or "
            "as a decorator on the function).",
        )
