"""A transform set on one part of a split: TD417 subset-transform-misapplied.

``random_split(dataset, ...)`` and ``Subset(dataset, indices)`` return views: each
``Subset`` keeps the one ``dataset`` it was given and returns ``dataset[indices[i]]``. Two
ways of giving the parts their own transforms fail without a word:

* ``val_set.transform = val_tf`` sets an attribute that ``Subset`` never reads: the
  samples still come through the dataset's own transform, and ``val_tf`` is never applied;
* ``val_set.dataset.transform = val_tf`` changes the dataset every part of the split
  shares: ``train_set`` is now served ``val_tf`` too (training loses its augmentation),
  or, set the other way round, validation is augmented.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from torchdoctor.findings import Depth
from torchdoctor.rules.detectors import detector
from torchdoctor.static.analysis.calls import last_name
from torchdoctor.static.context import Scope
from torchdoctor.static.rules.base import LintRule
from torchdoctor.static.structure import Item, ModuleScope

# The dataset attributes that decide what a sample looks like.
_TRANSFORM_ATTRIBUTES = frozenset({"transform", "transforms", "target_transform"})
_DATA = "torch.utils.data."


@dataclass(frozen=True)
class _Part:
    """One part of a split: its text, the call that made it and the parts beside it."""

    text: str
    call: ast.Call
    scope: Scope
    dataset: str
    siblings: tuple[str, ...]


@detector("TD417", depth=Depth.LINT)
class SubsetTransformMisapplied(LintRule):
    """``val_set.transform = ...`` or ``val_set.dataset.transform = ...`` on a part of a
    ``random_split``/``Subset`` of a dataset that other parts share."""

    requires = ("transform",)
    needs_structure = True

    def leave_module(self, module: ModuleScope) -> None:
        ctx = self.ctx
        if "random_split" not in ctx.source and "Subset" not in ctx.source:
            return
        parts = self._parts(module)
        if not parts:
            return
        for scope, items in module.bodies():
            for item in items:
                node = item.node
                if not (
                    isinstance(node, ast.Assign)
                    and len(node.targets) == 1
                    and isinstance(node.targets[0], ast.Attribute)
                    and node.targets[0].attr in _TRANSFORM_ATTRIBUTES
                ):
                    continue
                owner = node.targets[0].value
                through_dataset = isinstance(owner, ast.Attribute) and owner.attr == "dataset"
                subject = (
                    owner.value if isinstance(owner, ast.Attribute) and through_dataset else owner
                )
                part = _find(parts, ast.unparse(subject), scope, node.lineno)
                if part is None:
                    continue
                if through_dataset:
                    if _same_for_siblings(items, part, node):
                        continue  # kraken: every part gets the one same transform
                    if part.siblings and not _given_own_dataset(module, part, node.lineno):
                        self._report_shared(node, part)
                else:
                    self._report_ignored(node, part)

    def _parts(self, module: ModuleScope) -> list[_Part]:
        """Every part of a ``random_split`` unpacked into names, and every ``Subset`` of
        a dataset that another ``Subset`` in the same scope also takes."""
        ctx = self.ctx
        parts: list[_Part] = []
        for scope, items in module.bodies():
            subsets: list[tuple[str, ast.Call, str]] = []
            for item in items:
                node = item.node
                if not (
                    isinstance(node, ast.Assign)
                    and len(node.targets) == 1
                    and isinstance(node.value, ast.Call)
                    and node.value.args
                ):
                    continue
                called = ctx.qualified_name(node.value.func, scope) or ""
                if not called.startswith(_DATA):
                    continue
                last = called.rpartition(".")[2]
                target = node.targets[0]
                dataset = ast.unparse(node.value.args[0])
                if last == "random_split" and isinstance(target, (ast.Tuple, ast.List)):
                    names = [ast.unparse(e) for e in target.elts]
                    for name in names:
                        others = tuple(n for n in names if n != name and n != "_")
                        parts.append(_Part(name, node.value, scope, dataset, others))
                elif last == "Subset" and not isinstance(target, (ast.Tuple, ast.List)):
                    subsets.append((ast.unparse(target), node.value, dataset))
            for name, call, dataset in subsets:
                others = tuple(n for n, _, d in subsets if d == dataset and n != name)
                parts.append(_Part(name, call, scope, dataset, others))
        return parts

    def _report_ignored(self, node: ast.Assign, part: _Part) -> None:
        made = _made_by(part.call)
        value = _short(ast.unparse(node.value))
        self.report(
            node,
            f"`{part.text}.{_attribute(node)} = {value}` at line {node.lineno} sets an "
            f"attribute that `Subset` never reads: `{part.text}` comes from `{made}` at line "
            f"{part.call.lineno}, and a Subset returns `{part.dataset}[i]` exactly as that "
            "dataset's own transform makes it, so this assignment changes nothing and the "
            "part keeps the transform it was meant to lose",
            fix_hint=_FIX,
        )

    def _report_shared(self, node: ast.Assign, part: _Part) -> None:
        made = _made_by(part.call)
        value = _short(ast.unparse(node.value))
        others = ", ".join(f"`{s}`" for s in part.siblings[:3])
        verb = "returns" if len(part.siblings) == 1 else "return"
        self.report(
            node,
            f"`{part.text}.dataset.{_attribute(node)} = {value}` at line {node.lineno} "
            f"changes `{part.dataset}`, the one dataset every part of the `{made}` at line "
            f"{part.call.lineno} reads: {others} now {verb} samples made by `{value}` too, "
            "so training loses its augmentation (or evaluation gains it), without an error",
            fix_hint=_FIX,
        )


_FIX = (
    "Give each part a dataset of its own: build the dataset once per transform "
    "(`train_ds = MyDataset(root, transform=train_tf)`, `val_ds = MyDataset(root, "
    "transform=val_tf)`) and take `Subset(train_ds, train_idx)` and `Subset(val_ds, val_idx)` "
    "from one split of the indices (a `random_split` part's `.indices`)."
)


def _find(parts: list[_Part], text: str, scope: Scope, line: int) -> _Part | None:
    """The part named ``text``: a name made in this same scope before ``line``, or an
    attribute (``self.val_set``) made anywhere in the file."""
    for part in parts:
        if part.text != text:
            continue
        if "." in text or (part.scope is scope and part.call.lineno < line):
            return part
    return None


def _given_own_dataset(module: ModuleScope, part: _Part, line: int) -> bool:
    """``val_set.dataset = copy.deepcopy(full)`` before ``line``, or the part itself made a
    deep copy (``val = copy.deepcopy(val)``, torch-uncertainty's split helper), whose
    dataset is copied with it: the part was given a dataset of its own (the usual
    workaround), so its transform is its own too."""
    for scope, items in module.bodies():
        if "." not in part.text and scope is not part.scope:
            continue
        for item in items:
            node = item.node
            if not (isinstance(node, ast.Assign) and item.line < line):
                continue
            if any(
                isinstance(t, ast.Attribute)
                and t.attr == "dataset"
                and ast.unparse(t.value) == part.text
                for t in node.targets
            ):
                return True
            if (
                item.line > part.call.lineno
                and isinstance(node.value, ast.Call)
                and last_name(node.value.func) == "deepcopy"
                and any(ast.unparse(t) == part.text for t in node.targets)
            ):
                return True
    return False


def _same_for_siblings(items: list[Item], part: _Part, node: ast.Assign) -> bool:
    """Every sibling of ``part`` gets ``<sibling>.dataset.<attr> = <the same value>`` in
    the same body: the shared dataset ends with that value whichever part sets it, so no
    part gets another's transform."""
    target = node.targets[0]
    assert isinstance(target, ast.Attribute)
    value = ast.dump(node.value)
    assigned = {
        ast.unparse(item.node.targets[0].value.value)
        for item in items
        if isinstance(item.node, ast.Assign)
        and len(item.node.targets) == 1
        and isinstance(item.node.targets[0], ast.Attribute)
        and item.node.targets[0].attr == target.attr
        and isinstance(item.node.targets[0].value, ast.Attribute)
        and item.node.targets[0].value.attr == "dataset"
        and ast.dump(item.node.value) == value
    }
    return bool(part.siblings) and all(sibling in assigned for sibling in part.siblings)


def _made_by(call: ast.Call) -> str:
    return f"{last_name(call.func)}(...)"


def _attribute(node: ast.Assign) -> str:
    target = node.targets[0]
    return target.attr if isinstance(target, ast.Attribute) else ""


def _short(text: str) -> str:
    return text if len(text) <= 40 and "\n" not in text else text[:37] + "..."
