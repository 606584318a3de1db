"""Whether a model behaves differently in train and eval mode, when the file shows it.

Only a model whose class is defined in the linted file can be proven insensitive: if its
class (and the classes of this file it builds) creates no dropout, normalisation with
running statistics, or layer with built-in dropout, ``eval()`` changes nothing and the
mode rules stay quiet. Anything else is assumed sensitive.
"""

from __future__ import annotations

import ast

from torchdoctor.static.context import FileContext, Scope

__all__ = ["is_mode_sensitive"]

_SENSITIVE_WORDS = ("Dropout", "BatchNorm", "InstanceNorm", "Transformer", "MultiheadAttention",
                    "LSTM", "GRU", "RNN")
_SENSITIVE_FUNCTIONS = frozenset({
    "torch.nn.functional.dropout", "torch.nn.functional.dropout1d",
    "torch.nn.functional.dropout2d", "torch.nn.functional.dropout3d",
    "torch.nn.functional.alpha_dropout", "torch.nn.functional.feature_alpha_dropout",
    "torch.nn.functional.batch_norm", "torch.nn.functional.instance_norm",
    "torch.dropout", "torch.nn.functional.scaled_dot_product_attention",
})


def is_mode_sensitive(ctx: FileContext, model: ast.expr | None, scope: Scope) -> bool:
    """``False`` only when ``model`` is an instance of a class of this file that provably
    has no mode-dependent layer; ``True`` otherwise."""
    if model is None:
        return True
    type_name = ctx.instance_type(model, scope)
    if type_name is None or not type_name.startswith("<local>."):
        return True
    return _class_sensitive(ctx, type_name[len("<local>."):], set())


def _class_sensitive(ctx: FileContext, name: str, seen: set[str]) -> bool:
    cls = ctx.local_class(name)
    if cls is None or name in seen:
        return cls is None
    seen.add(name)
    for base in cls.node.bases:
        if isinstance(base, ast.Name) and ctx.local_class(base.id) is not None and \
                _class_sensitive(ctx, base.id, seen):
            return True
    for node in ast.walk(cls.node):
        if isinstance(node, ast.Call) and _call_sensitive(ctx, node, seen):
            return True
        if isinstance(node, ast.Attribute) and node.attr == "training":
            return True  # the class branches on its own mode
    return False


def _call_sensitive(ctx: FileContext, call: ast.Call, seen: set[str]) -> bool:
    func = call.func
    if isinstance(func, ast.Name) and ctx.local_class(func.id) is not None:
        return _class_sensitive(ctx, func.id, seen)
    qualified = ctx.qualified_name(func, None)
    if qualified is None:
        return False
    if qualified in _SENSITIVE_FUNCTIONS:
        return True
    last = qualified.rpartition(".")[2]
    if qualified.startswith("torch.nn.") and last[:1].isupper():
        return any(word in last for word in _SENSITIVE_WORDS)
    # A layer or model from elsewhere (torchvision, timm, ...): assume it may be.
    return last[:1].isupper() and not qualified.startswith("torch.")
