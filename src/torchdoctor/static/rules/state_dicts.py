"""State-dict rules: TD903 whole-module-saved, TD904 strict-false-result-ignored.

What goes into a checkpoint and what comes back out: ``torch.save(model)`` pickles the
module object instead of its ``state_dict`` (TD903); ``load_state_dict(..., strict=False)``
whose result, the keys it skipped, is thrown away (TD904).
"""

from __future__ import annotations

import ast

from torchdoctor.findings import Applicability, Confidence, Depth, Fix
from torchdoctor.rules.detectors import detector
from torchdoctor.static import torchapi
from torchdoctor.static.analysis.calls import keyword
from torchdoctor.static.context import FileContext, Scope
from torchdoctor.static.rules.base import LintRule

_MODULE_USES = frozenset(
    {"parameters", "named_parameters", "modules", "named_modules", "children", "train", "eval"}
)


@detector("TD903", depth=Depth.LINT)
class WholeModuleSaved(LintRule):
    """``torch.save(model)``: the module object pickled instead of its ``state_dict``."""

    requires = ("save",)
    call_names = frozenset({"save"})
    needs_structure = True

    def visit_call(self, node: ast.Call) -> None:
        ctx = self.ctx
        if not ctx.is_call_to(node, "torch.save"):
            return
        saved = node.args[0] if node.args else getattr(keyword(node, "obj"), "value", None)
        candidates = [saved] if not isinstance(saved, ast.Dict) else list(saved.values)
        for candidate in candidates:
            if isinstance(candidate, (ast.Name, ast.Attribute)):
                confidence = _module_confidence(ctx, candidate, ctx.function)
                if confidence is not None:
                    self._report(node, candidate, confidence)

    def _report(self, save: ast.Call, module: ast.expr, confidence: Confidence) -> None:
        ctx = self.ctx
        text = ctx.segment(module)
        fix = Fix(
            f"Save `{text}.state_dict()`",
            (ctx.replace(module, f"{text}.state_dict()"),),
            Applicability.UNSAFE,
        )
        self.report(
            module,
            f"`torch.save(...)` at line {save.lineno} pickles the whole module `{text}` "
            "instead of its weights: the file records the class by its import path, so it "
            "loads only where that class still exists unchanged at the same place, and "
            "only with full unpickling (`weights_only=False`, which runs code), never with "
            "torch's safe default",
            fix_hint=f"Save `{text}.state_dict()`; when loading, build the model in code "
            "and call `load_state_dict()`.",
            confidence=confidence,
            fix=fix,
        )


def _module_confidence(ctx: FileContext, expr: ast.expr, scope: Scope) -> Confidence | None:
    """``HIGH`` when the value is built from a module class; ``MEDIUM`` when only its name
    says so but the code also uses it as a module (``.parameters()``, ``.eval()``)."""
    found = ctx.family_of(expr, scope)
    if found is None or found[0] != torchapi.MODULE:
        return None
    if found[1] is Confidence.HIGH:
        return Confidence.HIGH
    text = ctx.segment(expr)
    items = scope.items if scope is not None else ctx.module.items
    for item in items:
        node = item.node
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _MODULE_USES
            and ctx.segment(node.func.value) == text
        ):
            return Confidence.MEDIUM
    return None


@detector("TD904", depth=Depth.LINT)
class StrictFalseResultIgnored(LintRule):
    """``model.load_state_dict(state, strict=False)`` whose result is thrown away."""

    requires = ("strict",)

    def visit_Expr(self, node: ast.Expr) -> None:
        self._check(node.value)

    def visit_Assign(self, node: ast.Assign) -> None:
        if node.value.__class__ is not ast.Call:
            return  # _check needs a call (the common case, decided first)
        if all(isinstance(t, ast.Name) and t.id == "_" for t in node.targets):
            self._check(node.value)

    def _check(self, call: ast.expr) -> None:
        if not (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and call.func.attr == "load_state_dict"
        ):
            return
        strict = keyword(call, "strict")
        value = (
            strict.value if strict is not None else (call.args[1] if len(call.args) > 1 else None)
        )
        if not (isinstance(value, ast.Constant) and value.value is False):
            return
        assign = keyword(call, "assign")
        if assign is not None and isinstance(assign.value, ast.Constant) and assign.value.value:
            return  # into a model built on the meta device: a key not loaded stays a meta
            # tensor, which fails loudly at the first forward instead of training silently
        receiver = call.func.value
        family = self.ctx.family_of(receiver)
        if family is not None and family[0] != torchapi.MODULE:
            return  # optimizers and schedulers have no strict mode
        text = self.ctx.segment(receiver)
        self.report(
            call,
            f"`{text}.load_state_dict(..., strict=False)` at line {call.lineno} throws away "
            "its result, the list of keys it skipped: a checkpoint whose names do not match "
            "(renamed layers, a `module.` prefix) loads nothing at all without a word, and "
            "the model silently keeps its random initialisation",
            fix_hint=f"Keep the result and check it: `result = {text}.load_state_dict(..., "
            "strict=False)`, then fail when `result.missing_keys` or "
            "`result.unexpected_keys` hold keys you did not expect.",
        )
