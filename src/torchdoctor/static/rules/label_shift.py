"""Causal language-model labels: TD310 labels-shifted-twice.

A causal LM that is given ``labels`` shifts them itself: Hugging Face's ``*ForCausalLM``
and ``*LMHeadModel`` classes, and any model whose ``forward`` slices ``labels[..., 1:]``
against ``logits[..., :-1]``. Labels built already shifted (``labels = input_ids[:, 1:]``,
``labels[:, :-1] = input_ids[:, 1:]``, ``{"labels": ids[1:]}``) are then shifted a second
time, and the model learns to predict the token after next; the loss still falls, so
nothing looks wrong. The rule needs the three in one file: labels named ``labels`` built
as a shifted copy of the tokens, a model of the file that shifts, and a call handing
``labels`` over (``labels=...`` or ``**batch``).
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from torchdoctor.findings import Depth, Finding
from torchdoctor.rules.detectors import detector
from torchdoctor.static import torchapi
from torchdoctor.static.context import FileContext
from torchdoctor.static.rules.base import LintRule
from torchdoctor.static.structure import ModuleScope

_LABELS = "labels"
_TOKEN_WORDS = frozenset({"input", "ids", "tokens", "token", "seq", "sequence", "text"})
_SHIFTING_CLASS_ENDINGS = ("ForCausalLM", "LMHeadModel")


@detector("TD310", depth=Depth.LINT)
class LabelsShiftedTwice(LintRule):
    """``labels`` built as ``input_ids[:, 1:]`` for a model that shifts labels itself."""

    requires = ("labels",)
    needs_structure = True

    def __init__(self, ctx: FileContext, sink: Callable[[Finding], None]) -> None:
        super().__init__(ctx, sink)
        # Without a slice from the second element on nothing is shifted (most files).
        self._slices = "1:]" in ctx.source
        self._builds: list[tuple[ast.AST, str]] = []
        self._handed_over = False

    def visit_Assign(self, node: ast.Assign) -> None:
        """``labels = ids[:, 1:]``, ``labels[:, :-1] = ids[:, 1:]``."""
        if (
            self._slices
            and len(node.targets) == 1
            and _names_labels(node.targets[0])
            and _shifted_tokens(node.value)
        ):
            self._builds.append((node, _text(node.value)))

    def visit_Dict(self, node: ast.Dict) -> None:
        """``{"labels": ids[1:]}``."""
        if not self._slices:
            return
        for key, value in zip(node.keys, node.values, strict=True):
            if isinstance(key, ast.Constant) and key.value == _LABELS and _shifted_tokens(value):
                self._builds.append((value, _text(value)))

    def visit_Call(self, node: ast.Call) -> None:
        """A call that passes ``labels=`` or unpacks a mapping (``model(**batch)``)."""
        if self._slices and not self._handed_over:
            self._handed_over = any(k.arg == _LABELS or k.arg is None for k in node.keywords)

    def leave_module(self, module: ModuleScope) -> None:
        if not self._builds or not self._handed_over:
            return
        shifter = self._shifting_model(module)
        if shifter is None:
            return
        for node, tokens in sorted(self._builds, key=lambda b: getattr(b[0], "lineno", 0)):
            self._report(node, tokens, shifter)

    def _shifting_model(self, module: ModuleScope) -> str | None:
        """The name of a model of the file that shifts its labels: a class whose
        ``forward`` slices ``labels[..., 1:]``, or a Hugging Face causal LM class it uses."""
        ctx = self.ctx
        for scope in module.classes:
            node = scope.node
            forward = next(
                (
                    f
                    for f in node.body
                    if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef) and f.name == "forward"
                ),
                None,
            )
            if forward is not None and any(
                _shifted_slice(n) and _named(n.value, _LABELS)
                for n in ast.walk(forward)
                if isinstance(n, ast.Subscript)
            ):
                return node.name
        if not any(ending in ctx.source for ending in _SHIFTING_CLASS_ENDINGS):
            return None
        for used in ast.walk(ctx.tree):
            if isinstance(used, ast.Attribute | ast.Name) and (
                used.attr if isinstance(used, ast.Attribute) else used.id
            ).endswith(_SHIFTING_CLASS_ENDINGS):
                qualified = ctx.qualified_name(used, None) or ""
                if qualified.startswith("transformers."):
                    return qualified.rpartition(".")[2]
        return None

    def _report(self, node: ast.AST, tokens: str, shifter: str) -> None:
        line = getattr(node, "lineno", 0)
        self.report(
            node,
            f"`{self.ctx.segment(node)}` at line {line} builds `labels` already shifted by one "
            f"(from `{tokens}`), but `{shifter}` shifts the labels it is given itself: "
            "position t is trained to predict token t+2, so the model learns to skip a "
            "token while the loss still falls",
            fix_hint=f"Pass the unshifted tokens as labels (`labels = {tokens}.clone()`, "
            "with -100 at padding); the model shifts them.",
            evidence={"model": shifter},
        )


def _names_labels(target: ast.expr) -> bool:
    while isinstance(target, ast.Subscript):
        target = target.value
    return isinstance(target, ast.Name) and target.id == _LABELS


def _shifted_tokens(value: ast.expr) -> bool:
    """A slice ``[..., 1:]`` (or ``[1:]``) of a name of tokens (``input_ids``, ``tokens``)."""
    return (
        isinstance(value, ast.Subscript)
        and _shifted_slice(value)
        and isinstance(value.value, ast.Name)
        and bool(set(torchapi.name_tokens(value.value.id)) & _TOKEN_WORDS)
    )


def _shifted_slice(node: ast.Subscript) -> bool:
    """The last index is ``1:``."""
    index = node.slice
    last = index.elts[-1] if isinstance(index, ast.Tuple) and index.elts else index
    return (
        isinstance(last, ast.Slice)
        and isinstance(last.lower, ast.Constant)
        and last.lower.value == 1
        and last.upper is None
        and last.step is None
    )


def _named(expr: ast.expr, name: str) -> bool:
    return isinstance(expr, ast.Name) and expr.id == name


def _text(value: ast.expr) -> str:
    inner = value.value if isinstance(value, ast.Subscript) else value
    return ast.unparse(inner)
