"""Which models of a file its optimizers train.

An optimizer built in the file from ``model.parameters()`` (or ``named_parameters()``,
inside a list, a dict of groups, a ``filter``) trains ``model``. Rules that judge a model
as trained (its mode, its gradients) ask :func:`optimized_models` first: a model no
optimizer of the file takes, such as a distillation teacher, is used, not trained.
:func:`optimizer_roots` reads one optimizer's models, :func:`covers` compares two paths.
"""

from __future__ import annotations

import ast

from torchdoctor.static import torchapi
from torchdoctor.static.analysis.calls import method_call, receiver, values_assigned
from torchdoctor.static.analysis.entries import key_text
from torchdoctor.static.context import FileContext, Scope
from torchdoctor.static.structure import ModuleScope

__all__ = [
    "covers",
    "is_optimizer",
    "model_path",
    "optimized_models",
    "optimizer_params",
    "optimizer_roots",
]


def is_optimizer(ctx: FileContext, call: ast.Call, scope: Scope) -> bool:
    """Whether ``call`` builds a torch optimizer (``torch.optim.SGD(...)``, a subclass)."""
    qualified = ctx.qualified_name(call.func, scope)
    return qualified is not None and torchapi.in_family(qualified, torchapi.OPTIMIZER)


def optimizer_roots(ctx: FileContext, value: ast.expr, scope: Scope) -> list[str]:
    """``["model"]`` for ``SGD(model.parameters())``; ``[]`` for anything else, and for an
    optimizer whose parameters are not read here (``SGD(params)`` made elsewhere)."""
    if not isinstance(value, ast.Call) or not (value.args or value.keywords):
        return []
    if not is_optimizer(ctx, value, scope):
        return []
    params = optimizer_params(ctx, value, scope)
    if params is None:
        return []
    return [
        model_path(ctx, receiver(node))
        for node in ast.walk(params)
        if method_call(node, "parameters", "named_parameters")
    ]


def optimizer_params(ctx: FileContext, call: ast.Call, scope: Scope) -> ast.expr | None:
    """The expression an optimizer call is given as its parameters (the first argument or
    ``params=``), through a name bound to it in reach; ``None`` when it cannot be seen."""
    params = (
        call.args[0]
        if call.args
        else next((k.value for k in call.keywords if k.arg == "params"), None)
    )
    if isinstance(params, ast.Name):
        found = ctx.lookup(params, scope)
        params = found[0].value if found is not None else None
    return params


def optimized_models(ctx: FileContext, module: ModuleScope) -> frozenset[str] | None:
    """The text of every model whose parameters an optimizer of this file takes
    (``{"model", "self.student"}``), or ``None`` when the file builds no optimizer or one
    whose parameters it cannot read."""
    found: set[str] = set()
    built = False
    for scope, items in module.bodies():
        for item in items:
            node = item.node
            if not isinstance(node, ast.Call) or not (node.args or node.keywords):
                continue
            if not is_optimizer(ctx, node, scope):
                continue
            roots = optimizer_roots(ctx, node, scope)
            if not roots and _free_tensors(ctx, optimizer_params(ctx, node, scope), scope):
                built = True  # `Adam([latent])`: it trains a tensor of its own, no model
                continue
            if not roots:
                return None
            built = True
            found.update(roots)
    return frozenset(found) if built else None


# torch functions that make a new tensor, owned by no module.
_FACTORIES = frozenset(
    {
        "empty",
        "empty_like",
        "eye",
        "full",
        "full_like",
        "normal",
        "ones",
        "ones_like",
        "rand",
        "rand_like",
        "randn",
        "randn_like",
        "tensor",
        "zeros",
        "zeros_like",
    }
)


def _free_tensors(ctx: FileContext, params: ast.expr | None, scope: Scope) -> bool:
    """``[latent]`` or ``[{"params": [codes]}]`` where each name is only ever bound to a
    tensor made by a torch factory (``torch.ones(1, n).normal_().cuda()``, or an
    ``nn.Parameter`` of one), or is a tensor the code makes trainable itself
    (``x.requires_grad_(True)``) or copies out of data (``.numpy()``, ``.detach()``): the
    optimizer trains those tensors (a latent code optimised at test time, an adversarial
    perturbation, injected node features), not any model's parameters."""
    if isinstance(params, ast.Dict):
        params = next(
            (v for k, v in zip(params.keys, params.values, strict=True) if key_text(k) == "params"),
            None,
        )
    if not isinstance(params, (ast.List, ast.Tuple)) or not params.elts:
        return False
    names: list[str] = []
    for element in params.elts:
        if isinstance(element, ast.Dict):
            if not _free_tensors(ctx, element, scope):
                return False
        elif isinstance(element, ast.Name):
            names.append(element.id)
        else:
            return False
    body: ast.AST = scope.node if scope is not None else ctx.tree
    for name in names:
        values = values_assigned(body, name)
        if not values:
            return False
        if all(_made_by_a_factory(ctx, v, scope) for v in values):
            continue
        if _made_trainable(body, name) or any(_from_data(v) for v in values):
            continue  # a tensor the code itself turned into something to optimise
        return False
    return True


def _made_trainable(body: ast.AST, name: str) -> bool:
    """``name.requires_grad_()`` / ``requires_grad_(True)`` or ``name.requires_grad =
    True``: only a plain tensor needs that (a module's parameters already require grad)."""
    for node in ast.walk(body):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "requires_grad_"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == name
            and not any(isinstance(a, ast.Constant) and a.value is False for a in node.args)
        ):
            return True
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Constant)
            and node.value.value is True
            and any(
                isinstance(t, ast.Attribute)
                and t.attr == "requires_grad"
                and isinstance(t.value, ast.Name)
                and t.value.id == name
                for t in node.targets
            )
        ):
            return True
    return False


def _from_data(value: ast.expr) -> bool:
    """A value taken out of autograd's reach: through ``.numpy()``, ``.detach()``,
    ``.data`` or a numpy function (an input copied to be perturbed, never a parameter)."""
    for node in ast.walk(value):
        if isinstance(node, ast.Attribute) and node.attr in ("numpy", "detach", "data"):
            return True
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id in ("np", "numpy")
        ):
            return True
    return False


def _made_by_a_factory(ctx: FileContext, value: ast.expr, scope: Scope) -> bool:
    """A torch factory call, through methods called on its result and ``nn.Parameter``."""
    while isinstance(value, ast.Call):
        qualified = ctx.qualified_name(value.func, scope) or ""
        if qualified == "torch.nn.Parameter" and value.args:
            value = value.args[0]
            continue
        if qualified.startswith("torch.") and qualified.rsplit(".", 1)[-1] in _FACTORIES:
            return True
        if not isinstance(value.func, ast.Attribute):
            return False
        value = value.func.value  # `.normal_(...)`, `.cuda()`, `.requires_grad_()`
    return False


def covers(trained: str, model: str) -> bool:
    """Whether training ``trained`` trains (part of) ``model``, or the other way round."""
    return trained == model or trained.startswith(model + ".") or model.startswith(trained + ".")


def model_path(ctx: FileContext, expr: ast.expr) -> str:
    """``model.classifier`` for ``model.classifier[6]``; dotted text otherwise."""
    while isinstance(expr, ast.Subscript):
        expr = expr.value
    return "".join(ctx.segment(expr).split())
