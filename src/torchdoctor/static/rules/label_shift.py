"""Causal language-model labels: TD310 labels-shifted-twice.

A causal LM that is given ``labels`` shifts them itself: Hugging Face's ``*ForCausalLM``
and ``*LMHeadModel`` classes, and any model whose ``forward`` slices ``labels[..., 1:]``
against ``logits[..., :-1]``. Labels built already shifted (``labels = input_ids[:, 1:]``,
``labels[:, :-1] = input_ids[:, 1:]``, ``{"labels": ids[1:]}``) are then shifted a second
time, and the model learns to predict the token after next; the loss still falls, so
nothing looks wrong. The rule needs the three in one file: labels named ``labels`` built
as a shifted copy of the tokens, a model of the file that shifts, and a call handing
``labels`` over (``labels=...`` or ``**batch``).

A function that builds ``labels = ids[:, 1:]`` and only consumes it itself (its own loss
call, ``.view``, ``masked_fill``, ``labels[:, :n] = -100``) while the model gets
``input_ids`` alone shifts once, correctly (distillm's ``get_teacher_lm_loss``): such a
build is dropped unless some read of ``labels`` in its function hands it on.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from torchdoctor.findings import Depth, Finding
from torchdoctor.rules.detectors import detector
from torchdoctor.static import torchapi
from torchdoctor.static.context import FileContext
from torchdoctor.static.names import ScopeArg
from torchdoctor.static.rules.base import LintRule
from torchdoctor.static.structure import FunctionScope, ModuleScope

_LABELS = "labels"
_TOKEN_WORDS = frozenset({"input", "ids", "tokens", "token", "seq", "sequence", "text"})
_SHIFTING_CLASS_ENDINGS = ("ForCausalLM", "LMHeadModel")
_LOSS_WORDS = frozenset({"loss", "criterion", "entropy", "nll"})
# Reads that give something other than the labels: their shape, or a mask of them.
_NOT_LABELS = frozenset({"shape", "size", "dtype", "device", "ndim", "dim", "numel", "ne", "eq"})
# Statements that evaluate a read and keep nothing of it (`labels.masked_fill_(...)`).
_EVALUATING = (ast.Expr, ast.If, ast.While, ast.Assert)
_Parents = dict[ast.AST, ast.AST]


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
        # `labels = ids[:, 1:]` in a function, judged when the function ends.
        self._named_builds: set[ast.AST] = set()
        self._kept_local: set[ast.AST] = set()
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
            if isinstance(node.targets[0], ast.Name):
                self._named_builds.add(node)

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

    def leave_function(self, function: FunctionScope) -> None:
        """Drop the function's ``labels = ids[:, 1:]`` builds when it never hands
        ``labels`` on: it computes the loss itself, and the one shift is its own."""
        if not self._named_builds:
            return
        builds = [item.node for item in function.items if item.node in self._named_builds]
        if builds and not _labels_handed_on(self.ctx, function):
            self._kept_local.update(builds)

    def leave_module(self, module: ModuleScope) -> None:
        builds = [b for b in self._builds if b[0] not in self._kept_local]
        if not builds or not self._handed_over:
            return
        shifter = self._shifting_model(module)
        if shifter is None:
            return
        for node, tokens in sorted(builds, key=lambda b: getattr(b[0], "lineno", 0)):
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


def _labels_handed_on(ctx: FileContext, function: FunctionScope) -> bool:
    """Whether some read of ``labels`` in ``function`` (nested code included) may hand it
    on: one walk of the function, only for functions that build shifted labels."""
    parents: _Parents = {}
    reads: list[ast.Name] = []
    for node in ast.walk(function.node):
        for child in ast.iter_child_nodes(node):
            parents[child] = node
        if isinstance(node, ast.Name) and node.id == _LABELS and isinstance(node.ctx, ast.Load):
            reads.append(node)
    return any(_read_handed_on(ctx, function, read, parents) for read in reads)


def _read_handed_on(ctx: FileContext, scope: ScopeArg, read: ast.Name, parents: _Parents) -> bool:
    """Climb from the read to the first node that decides; undecided means handed on."""
    child: ast.AST = read
    parent = parents.get(child)
    while parent is not None:
        verdict = _decides(ctx, scope, child, parent, parents)
        if verdict is not None:
            return verdict
        child, parent = parent, parents.get(parent)
    return True


def _decides(
    ctx: FileContext, scope: ScopeArg, child: ast.AST, parent: ast.AST, parents: _Parents
) -> bool | None:
    """True: ``parent`` hands the value on; False: it consumes it; None: look further up."""
    if isinstance(parent, ast.keyword):
        return parent.arg == _LABELS or _argument_handed_on(ctx, scope, parents[parent], parents)
    if isinstance(parent, ast.Call):
        # `labels.view(-1)` is still the labels; an argument goes wherever the call takes it.
        return None if child is parent.func else _argument_handed_on(ctx, scope, parent, parents)
    if isinstance(parent, ast.Attribute):
        return False if parent.attr in _NOT_LABELS else None
    if isinstance(parent, ast.Subscript):
        # `labels[:, :n] = -100` writes into the labels; `x[labels]` is not the labels.
        return None if child is parent.value and isinstance(parent.ctx, ast.Load) else False
    if isinstance(parent, ast.Compare):
        return False  # a mask of the labels (`labels != -100`), not the labels
    if isinstance(parent, ast.Dict | ast.Return | ast.Yield | ast.YieldFrom):
        return True
    if isinstance(parent, ast.Assign | ast.AnnAssign | ast.AugAssign | ast.NamedExpr):
        return child is parent.value and not _rebinds_labels(parent)
    if isinstance(parent, ast.expr | ast.comprehension):
        return None
    return not isinstance(parent, _EVALUATING)


def _argument_handed_on(
    ctx: FileContext, scope: ScopeArg, call: ast.AST, parents: _Parents
) -> bool:
    """An argument is handed on, unless the call is a loss (``loss_fn(logits, labels)``,
    ``F.cross_entropy``) or a torch function whose result stays in ``labels``
    (``labels = torch.masked_fill(labels, ...)``)."""
    if not isinstance(call, ast.Call) or _named(call.func, "dict"):
        return True
    qualified = ctx.qualified_name(call.func, scope) or ""
    if qualified.startswith("torch.nn.functional.") or _loss_named(call.func):
        return False
    statement = parents.get(call)
    return not (
        qualified.startswith("torch.")
        and isinstance(statement, ast.Assign)
        and statement.value is call
        and _rebinds_labels(statement)
    )


def _loss_named(func: ast.expr) -> bool:
    last = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return bool(set(torchapi.name_tokens(last)) & _LOSS_WORDS)


def _rebinds_labels(statement: ast.Assign | ast.AnnAssign | ast.AugAssign | ast.NamedExpr) -> bool:
    """The statement stores its value back in ``labels`` itself, not under another name."""
    targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
    return all(_named(target, _LABELS) for target in targets)


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
