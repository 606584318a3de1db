"""Whether autograd is off at a place: ``no_grad``, ``inference_mode``, ``set_grad_enabled``.

:func:`grad_disabled_by` reads the blocks around a place (``with torch.no_grad():``) and the
decorators of its function (``@torch.inference_mode()``), innermost first, so that an
``enable_grad()`` nested inside a ``no_grad()`` block turns autograd back on.
"""

from __future__ import annotations

import ast

from torchdoctor.static import torchapi
from torchdoctor.static.context import FileContext, Scope
from torchdoctor.static.structure import Frame, FrameKind

__all__ = ["grad_disabled_by"]

_GRAD_OFF = torchapi.GRAD_OFF
_GRAD_ON = torchapi.GRAD_ON
_SET_GRAD = torchapi.SET_GRAD_ENABLED


def grad_disabled_by(ctx: FileContext, frames: tuple[Frame, ...]) -> ast.AST | None:
    """The ``with`` statement or decorator that disables autograd at a place, if any.

    Looks outward from the innermost block to the enclosing function (whose decorators
    count) and stops there: a function defined inside a ``no_grad`` block runs whenever
    it is called. ``enable_grad()``/``set_grad_enabled(True)`` nested inside turns
    autograd back on; ``set_grad_enabled(flag)`` with a run-time flag is not assumed off.
    """
    scope = ctx.function_of(frames)
    for frame in reversed(frames):
        if frame.kind is FrameKind.WITH:
            state = _with_grad_state(ctx, frame.node, scope)  # type: ignore[arg-type]
            if state is not None:
                return frame.node if state is False else None
        elif frame.kind is FrameKind.FUNCTION:
            node = frame.node
            function = ctx.scopes.get(node)
            decorators: list[ast.expr] = getattr(node, "decorator_list", [])
            for decorator in decorators:
                if (
                    _grad_state(
                        ctx, decorator, function.parent if function else None, decorator=True
                    )
                    is False
                ):
                    return decorator
            return None
        elif frame.kind in (FrameKind.CLASS, FrameKind.MODULE):
            return None
    return None


def _with_grad_state(ctx: FileContext, node: ast.With | ast.AsyncWith, scope: Scope) -> bool | None:
    state = None
    for item in node.items:
        found = _grad_state(ctx, item.context_expr, scope)
        if found is not None:
            state = found
    return state


def _grad_state(
    ctx: FileContext, expr: ast.expr, scope: Scope, decorator: bool = False
) -> bool | None:
    """False: disables grad; True: enables it; None: neither or unknown."""
    call = expr if isinstance(expr, ast.Call) else None
    name = ctx.qualified_name(call.func if call else expr, scope)
    if name is None or (call is None and not decorator):
        return None
    args = list(call.args) if call else []
    keywords = {k.arg: k.value for k in call.keywords} if call else {}
    if name in _GRAD_OFF:
        flag = args[0] if args else keywords.get("mode")
        if flag is None:
            return False
        return (not flag.value) if isinstance(flag, ast.Constant) else None
    if name in _GRAD_ON:
        return True
    if name == _SET_GRAD:
        flag = args[0] if args else keywords.get("mode")
        if isinstance(flag, ast.Constant) and isinstance(flag.value, bool):
            return flag.value
    return None
