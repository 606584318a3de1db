"""A layer built and then frozen before it ever trained: TD226 at lint.

``model.fc = nn.Linear(512, 20)`` makes a layer of random weights; freezing it afterwards
in the same function (``for p in model.fc.parameters(): p.requires_grad = False``,
``model.fc.requires_grad_(False)``, ``model.fc.weight.requires_grad = False``), with nothing
setting it trainable again, leaves it a fixed random projection for the whole run. The
usual source is a fine-tuning recipe that attaches the new head and then freezes the
wrong part. Judged in one function, in source order.
"""

from __future__ import annotations

import ast

from torchdoctor.findings import Depth
from torchdoctor.rules.detectors import detector
from torchdoctor.static import torchapi
from torchdoctor.static.analysis.calls import requires_grad_setting
from torchdoctor.static.analysis.optimized import model_path
from torchdoctor.static.rules.base import LintRule
from torchdoctor.static.structure import Item, ModuleScope


@detector("TD226", depth=Depth.LINT)
class NewLayerFrozen(LintRule):
    """``model.head = nn.Linear(...)`` then ``model.head.requires_grad_(False)``."""

    requires = ("requires_grad",)
    needs_structure = True

    def leave_module(self, module: ModuleScope) -> None:
        if "backward" not in self.ctx.source:
            return  # a file that never trains: freezing is for export or inference
        for scope, items in module.bodies():
            built: dict[str, Item] = {}
            for item in items:
                node = item.node
                if (
                    isinstance(node, ast.Assign)
                    and len(node.targets) == 1
                    and _replaces_a_layer(node.targets[0])
                    and self._new_layer(node.value, scope)
                ):
                    built[model_path(self.ctx, node.targets[0])] = item
                    continue
                change = _requires_grad_change(item)
                if change is None:
                    continue
                path, trainable = change
                layer = next((b for b in built if path == b or path.startswith(b + ".")), None)
                if layer is None:
                    continue
                if trainable:
                    built.pop(layer)  # set trainable again: whatever came before is undone
                elif not self._unfrozen_later(items, item, layer):
                    self._report(item, layer, built.pop(layer))

    def _new_layer(self, value: ast.expr, scope: object) -> bool:
        """A module with parameters built right there, not loaded (``pretrained=``,
        ``weights=``)."""
        type_name = self.ctx.instance_type(value, scope)  # type: ignore[arg-type]
        return (
            isinstance(value, ast.Call)
            and type_name is not None
            and self.ctx.is_family(type_name, torchapi.MODULE)
            and not torchapi.holds_no_parameters(type_name)
            and not any(k.arg in ("pretrained", "weights") for k in value.keywords)
        )

    def _unfrozen_later(self, items: list[Item], frozen: Item, layer: str) -> bool:
        """Set trainable again, or given weights (``load_state_dict``, ``copy_``) later."""
        root = layer.partition(".")[0]
        for item in items:
            if item.line <= frozen.line:
                continue
            node = item.node
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("load_state_dict", "copy_", "load")
                and _path(node.func.value).partition(".")[0] == root
            ):
                return True
            change = _requires_grad_change(item)
            if (
                change is not None
                and change[1]
                and (change[0] == layer or layer.startswith(change[0] + "."))
            ):
                return True
        return False

    def _report(self, frozen: Item, layer: str, built: Item) -> None:
        self.report(
            frozen.node,
            f"`{layer}` is built at line {built.line} with random weights and frozen at "
            f"line {frozen.line}, before any training: nothing sets it trainable again, so "
            "it stays a fixed random projection and only the layers around it learn",
            fix_hint=f"Freeze the pretrained part and leave `{layer}` trainable (or freeze "
            "before attaching the new layer).",
        )


def _replaces_a_layer(target: ast.expr) -> bool:
    """``model.fc = ...`` or ``model.classifier[6] = ...`` on a model held in a variable:
    a layer swapped on a built model. A class building its own parts on ``self`` (frozen
    random targets, fixed random features) does so on purpose."""
    while isinstance(target, ast.Subscript):
        target = target.value
    if not isinstance(target, ast.Attribute):
        return False
    root = target.value
    while isinstance(root, ast.Attribute):
        root = root.value
    return isinstance(root, ast.Name) and root.id not in ("self", "cls")


def _requires_grad_change(item: Item) -> tuple[str, bool] | None:
    """``(model path, trainable)`` for a statement that sets ``requires_grad`` on a
    layer's parameters: ``layer.requires_grad_(False)``, ``layer.weight.requires_grad =
    False``, or ``p.requires_grad = False`` in ``for p in layer.parameters():``."""
    node = item.node
    setting = requires_grad_setting(node) if isinstance(node, (ast.Call, ast.Assign)) else None
    if setting is None:
        return None
    owner, trainable = setting
    if isinstance(node, ast.Call):
        return _path(owner), trainable
    loop = next(
        (
            f.node
            for f in reversed(item.frames)
            if isinstance(f.node, ast.For)
            and isinstance(f.node.target, ast.Name)
            and isinstance(owner, ast.Name)
            and f.node.target.id == owner.id
        ),
        None,
    )
    if loop is not None:
        source = loop.iter
        if (
            isinstance(source, ast.Call)
            and isinstance(source.func, ast.Attribute)
            and source.func.attr == "parameters"
        ):
            return _path(source.func.value), trainable
        return None
    if isinstance(owner, ast.Attribute):
        return _path(owner.value), trainable
    return None


def _path(expr: ast.expr) -> str:
    while isinstance(expr, ast.Subscript):
        expr = expr.value
    return "".join(ast.unparse(expr).split())
