"""The entries a scope writes into a dict by name: ``ckpt["model"] = model.state_dict()``."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from torchdoctor.static.context import FileContext, Scope

__all__ = ["item_assignments", "key_text"]


def key_text(key: ast.expr | None) -> str | None:
    """The text of a string key (``"model"``), ``None`` for any other key."""
    return key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else None


def item_assignments(
    ctx: FileContext, name: str, scope: Scope
) -> Iterator[tuple[str | None, ast.expr]]:
    """``(key text, value)`` of each ``name[key] = value`` statement in the scope."""
    items = scope.items if scope is not None else ctx.module.items
    for item in items:
        node = item.node
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if (
                    isinstance(target, ast.Subscript)
                    and isinstance(target.value, ast.Name)
                    and target.value.id == name
                ):
                    yield key_text(target.slice), node.value
