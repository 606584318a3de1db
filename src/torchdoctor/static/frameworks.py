"""Code whose training loop a framework runs: loop-order rules stay out of it.

In a ``LightningModule`` (``training_step``, manual optimization), a Hugging Face
``Trainer`` subclass (``compute_loss``, ``training_step``) or an event handler registered
with a decorator (ignite's ``@trainer.on(Events.ITERATION_COMPLETED)``), the framework
calls ``zero_grad``/``step``/``backward`` around the user's code, or the user's code runs
once per event, not once per loop iteration. :func:`framework_owned` tells a rule so;
classes are followed through their bases across the project (without importing anything).
"""

from __future__ import annotations

import ast

from torchdoctor.static.context import FileContext
from torchdoctor.static.structure import FunctionScope

__all__ = ["FRAMEWORK_BASES", "framework_owned"]

# Bases (qualified-name prefixes) whose subclasses' methods a framework calls.
FRAMEWORK_BASES = (
    "lightning.",
    "pytorch_lightning.",
    "lightning_fabric.",
    "transformers.Trainer",
    "transformers.trainer.",
    "transformers.Seq2SeqTrainer",
    "ignite.",
    "accelerate.",
    "composer.",
)
# Decorators that register a function as an event handler: `@engine.on(...)`.
_HANDLER_DECORATORS = frozenset({"on", "add_event_handler", "hook", "register_hook"})
_MAX_DEPTH = 8


def framework_owned(ctx: FileContext, function: FunctionScope | None) -> bool:
    """Whether ``function`` (or a function around it) is run by a training framework: a
    method of a framework subclass, or a decorated event handler."""
    key = ("frameworks", id(function))
    cached = ctx.memo.get(key)
    if cached is not None:
        return bool(cached)
    owned = False
    scope = function
    while scope is not None and not owned:
        owned = _handler(scope) or (
            scope.owner is not None and _framework_class(ctx, scope.owner.node)
        )
        scope = scope.parent
    ctx.memo[key] = owned
    return owned


def _handler(function: FunctionScope) -> bool:
    for decorator in function.node.decorator_list:
        if (
            isinstance(decorator, ast.Call)
            and isinstance(decorator.func, ast.Attribute)
            and decorator.func.attr in _HANDLER_DECORATORS
        ):
            return True
    return False


def _framework_class(ctx: FileContext, cls: ast.ClassDef) -> bool:
    pending: list[str] = []
    for base in cls.bases:
        name = ctx.qualified_name(base, None)
        if name is None and isinstance(base, ast.Name):
            name = ctx.relative_imports.get(base.id) or (
                f"<local>.{base.id}" if ctx.local_class(base.id) is not None else None
            )
        if name is not None:
            pending.append(name)
    seen: set[str] = set()
    while pending and len(seen) < _MAX_DEPTH * 4:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        if name.startswith(FRAMEWORK_BASES):
            return True
        info = ctx.project.module_class(name, near=ctx.path)
        if info is not None:
            pending.extend(info.bases)
    return False
