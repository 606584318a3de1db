"""TD104 target-dtype-wrong-for-loss: class indices cast to a float dtype for a
cross-entropy or NLL loss.

Every ``cross_entropy``/``nll_loss`` call of the file (:func:`~.loss.loss_calls`) whose
target is a float cast (``y.float()``, ``y.to(torch.float32)``, directly or a few lines up)
of something that holds class indices: a batch element, an ``argmax``, a name such as
``labels``. Soft labels (one-hot, mixup, label smoothing) stay quiet.
"""

from __future__ import annotations

import ast

from torchdoctor.findings import Applicability, Confidence, Depth, Fix
from torchdoctor.rules.detectors import detector
from torchdoctor.static import torchapi
from torchdoctor.static.analysis.calls import last_name
from torchdoctor.static.analysis.losses import loss_calls
from torchdoctor.static.bindings import BindingKind
from torchdoctor.static.branches import conditional
from torchdoctor.static.context import FileContext, Scope
from torchdoctor.static.rules.base import LintRule
from torchdoctor.static.structure import ModuleScope
from torchdoctor.static.torchapi import LossKind

_FLOAT_DTYPES = torchapi.FLOAT_DTYPES
_FLOAT_CASTS = frozenset({"float", "double", "half", "bfloat16"})
_TARGET_WORDS = frozenset(
    {
        "label",
        "labels",
        "target",
        "targets",
        "y",
        "cls",
        "class",
        "classes",
        "idx",
        "index",
        "indices",
        "gt",
        "truth",
        "lbl",
        "tgt",
        "category",
        "categories",
    }
)
_KEEPS_VALUES = frozenset(
    {"to", "cuda", "cpu", "squeeze", "view", "reshape", "flatten", "detach", "clone", "contiguous"}
)
_SOFT_WORDS = frozenset(
    {
        "soft",
        "onehot",
        "one",
        "hot",
        "prob",
        "probs",
        "probabilities",
        "smooth",
        "smoothed",
        "mix",
        "mixed",
        "mixup",
        "cutmix",
        "dist",
        "distribution",
        "teacher",
        "logits",
        "weights",
    }
)


@detector("TD104", depth=Depth.LINT)
class TargetCastToFloat(LintRule):
    """Class-index targets cast to a float dtype and given to CrossEntropyLoss/NLLLoss."""

    requires = ("cross_entropy", "CrossEntropyLoss", "nll_loss", "NLLLoss")
    needs_structure = True

    def leave_module(self, module: ModuleScope) -> None:
        for call in loss_calls(self.ctx):
            if call.kind not in (LossKind.CROSS_ENTROPY, LossKind.NLL):
                continue
            target, scope = call.target, call.scope
            if isinstance(target, ast.Name):  # `y = y.float()` a few lines up
                found = self.ctx.lookup(target, scope)
                if (
                    found is None
                    or found[0].kind is not BindingKind.ASSIGN
                    or conditional(self.ctx, found[0].node, target, found[1])
                ):
                    continue
                target, scope = found[0].value, found[1]
            if not isinstance(target, ast.Call) or not self._casts_to_float(target, scope):
                continue
            assert isinstance(target.func, ast.Attribute)
            confidence = self._class_indices(target.func.value, scope)
            if confidence is not None:
                self._report(call.call, target, call.kind, confidence)

    def _casts_to_float(self, call: ast.Call, scope: Scope) -> bool:
        func = call.func
        if not isinstance(func, ast.Attribute) or self.ctx.qualified_name(func, scope):
            return False
        if func.attr in _FLOAT_CASTS:
            return not call.args and not call.keywords
        if func.attr in ("to", "type"):
            dtype = (
                call.args[0]
                if call.args
                else next((k.value for k in call.keywords if k.arg == "dtype"), None)
            )
            return dtype is not None and self.ctx.qualified_name(dtype, scope) in _FLOAT_DTYPES
        return False

    def _class_indices(self, base: ast.expr, scope: Scope, depth: int = 0) -> Confidence | None:
        """How sure we are that ``base`` holds class indices (``None``: not at all)."""
        if depth > 4:
            return None
        if isinstance(base, ast.Call):
            return self._call_gives_indices(base, scope, depth)
        if isinstance(base, ast.Subscript):
            key = base.slice
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                return _by_name(key.value)
            return None
        if isinstance(base, ast.Attribute):
            return _by_name(base.attr)
        if not isinstance(base, ast.Name):
            return None
        return self._name_holds_indices(base, scope, depth)

    def _call_gives_indices(self, call: ast.Call, scope: Scope, depth: int) -> Confidence | None:
        """``y.argmax(1)``, ``torch.randint(...)``, ``labels.long()``; through ``.to()``."""
        func = call.func
        name = func.attr if isinstance(func, ast.Attribute) else ""
        if name in ("argmax", "long") or self.ctx.is_call_to(
            call, "torch.argmax", "torch.randint", scope=scope
        ):
            return Confidence.HIGH
        if name in _KEEPS_VALUES and isinstance(func, ast.Attribute):
            return self._class_indices(func.value, scope, depth + 1)
        return None

    def _name_holds_indices(self, name: ast.Name, scope: Scope, depth: int) -> Confidence | None:
        """A batch element unpacked by a loop, or what the name was assigned; else its
        spelling (``labels``, ``target``)."""
        ctx = self.ctx
        by_name = _by_name(name.id)
        found = ctx.lookup(name, scope)
        if found is None or _is_soft(name.id):
            return by_name
        binding = found[0]
        if binding.kind is BindingKind.LOOP_TARGET and _one_hot_elsewhere(
            ctx, binding.node, name.id
        ):
            return None  # the file reads this loader's batches as one-hot rows
        if binding.kind is BindingKind.LOOP_TARGET or (
            binding.kind is BindingKind.UNPACKED and not isinstance(binding.value, ast.Call)
        ):
            return Confidence.HIGH
        if binding.kind is BindingKind.ASSIGN and binding.value is not None:
            value = binding.value
            if isinstance(value, (ast.BinOp, ast.IfExp)) or any(
                isinstance(n, ast.Call)
                and ctx.is_call_to(n, "torch.nn.functional.one_hot", scope=found[1])
                for n in ast.walk(value)
            ):
                return None  # mixed (mixup, label smoothing) or one-hot: soft labels
            if isinstance(value, ast.Call):
                return self._class_indices(value, found[1], depth + 1)
            if isinstance(value, (ast.Name, ast.Subscript, ast.Attribute)):
                return self._class_indices(value, found[1], depth + 1) or by_name
        return by_name

    def _report(
        self, call: ast.Call, target: ast.Call, kind: LossKind, confidence: Confidence
    ) -> None:
        ctx = self.ctx
        assert isinstance(target.func, ast.Attribute)
        base = ctx.segment(target.func.value)
        fix = None
        if target.func.attr in _FLOAT_CASTS:
            fix = Fix(
                f"Keep `{base}` as class indices: `{base}.long()`",
                (ctx.replace(target, f"{base}.long()"),),
                Applicability.UNSAFE,
            )
        where = "" if call.lineno == target.lineno else f" (line {call.lineno})"
        self.report(
            target,
            f"`{ctx.segment(target)}` at line {target.lineno} casts class indices to a float "
            f"dtype for {kind.value}{where}: a floating-point target is read as class "
            "probabilities with the input's shape, so the call fails with \"expected target "
            'dtype to be Long" instead of training',
            fix_hint=f"Pass the class indices as int64: `{base}.long()` (or `{base}` if it "
            "already is); use a float target only for soft labels of shape (N, C).",
            confidence=confidence,
            fix=fix,
        )


def _one_hot_elsewhere(ctx: FileContext, loop: ast.AST, name: str) -> bool:
    """A loop of the file over the same iterable takes ``argmax`` of ``name`` (FL-bench's
    AdCol: ``y = torch.argmax(y, dim=1)`` when it tests the discriminator): the batches
    hold one-hot rows, soft targets by design, not class indices."""
    if not isinstance(loop, (ast.For, ast.AsyncFor)):
        return False
    source = ast.unparse(loop.iter)
    for other in ast.walk(ctx.tree):
        if not isinstance(other, (ast.For, ast.AsyncFor)) or ast.unparse(other.iter) != source:
            continue
        for node in ast.walk(other):
            if not (isinstance(node, ast.Call) and last_name(node.func) == "argmax"):
                continue
            operands = [node.func.value] if isinstance(node.func, ast.Attribute) else []
            operands += node.args[:1]  # `y.argmax(1)`, `torch.argmax(y, dim=1)`
            if any(isinstance(o, ast.Name) and o.id == name for o in operands):
                return True
    return False


def _is_soft(name: str) -> bool:
    return bool(set(torchapi.name_tokens(name)) & _SOFT_WORDS)


def _by_name(name: str) -> Confidence | None:
    tokens = set(torchapi.name_tokens(name))
    if tokens & _SOFT_WORDS or not tokens & _TARGET_WORDS:
        return None
    return Confidence.MEDIUM
