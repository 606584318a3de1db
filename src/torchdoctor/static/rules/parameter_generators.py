"""TD617 parameter-generator-exhausted: ``params = model.parameters()`` used twice.

``parameters()`` returns a generator: the first user (an optimizer, ``list()``, a ``for``
loop) drains it and every later user sees no parameters at all — a second optimizer group
that is empty, a ``clip_grad_norm_`` that clips nothing. A consumer inside a loop drains it
on its first iteration. Wrapping it in ``list(...)`` once keeps it reusable.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from torchdoctor.findings import Applicability, Depth, Fix
from torchdoctor.rules.detectors import detector
from torchdoctor.static import torchapi
from torchdoctor.static.analysis.calls import last_name, requires_grad_setting
from torchdoctor.static.branches import if_arms, on_opposite_arms
from torchdoctor.static.context import FileContext, Scope
from torchdoctor.static.rules.base import LintRule
from torchdoctor.static.structure import (
    ClassScope,
    Frame,
    FrameKind,
    FunctionScope,
    Item,
    ModuleScope,
)

_GENERATOR_METHODS = frozenset({"parameters", "named_parameters"})
_ONE_SHOT_WRAPPERS = frozenset({"filter", "map", "itertools.chain", "zip"})
_WRAPPER_NAMES = frozenset(name.rpartition(".")[2] for name in _ONE_SHOT_WRAPPERS)
# Calls that look at a generator without draining it (``next`` takes one item on purpose).
_HARMLESS = frozenset({"print", "id", "type", "isinstance", "repr", "str", "callable", "next"})
_CONTAINERS = (ast.List, ast.Tuple, ast.Set, ast.Starred, ast.Dict)


@dataclass(frozen=True, slots=True)
class _Use:
    call: ast.AST
    repeated: bool  # inside a loop the assignment is not in: drains on every iteration
    frames: tuple[Frame, ...] = ()  # where it runs: two uses in exclusive branches never
    # both run (an optimizer factory's `if name == "sgd": ... elif name == "momentum":`)
    freezes: bool = False  # a loop that only freezes what it drains: later users lose
    # nothing they would train (grover's `for param in base_params: requires_grad = False`)


@detector("TD617", depth=Depth.LINT)
class ParameterGeneratorExhausted(LintRule):
    """A stored ``parameters()`` generator consumed by two users (or in a loop)."""

    requires = ("parameters",)
    needs_structure = True

    def leave_module(self, module: ModuleScope) -> None:
        ctx = self.ctx
        for scope, items in module.bodies():
            for item in items:
                node = item.node
                if (
                    isinstance(node, ast.Assign)
                    and len(node.targets) == 1
                    and isinstance(node.targets[0], ast.Name)
                    and self._generator(node.value, scope)
                ):
                    uses = _name_uses(ctx, items, item, node.targets[0].id, scope)
                    self._judge(item, node.targets[0].id, uses)
        for cls in module.classes:
            self._attributes(cls)

    def _attributes(self, cls: ClassScope) -> None:
        for method in cls.methods.values():
            for item in method.items:
                node = item.node
                if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
                    continue
                target = node.targets[0]
                if (
                    isinstance(target, ast.Attribute)
                    and isinstance(target.value, ast.Name)
                    and target.value.id == method.self_name
                    and self._generator(node.value, method)
                ):
                    uses = [
                        use
                        for other in cls.methods.values()
                        for use in _attribute_uses(other, item, target.attr)
                    ]
                    self._judge(item, f"{target.value.id}.{target.attr}", uses)

    def _generator(self, value: ast.expr, scope: Scope) -> bool:
        """A one-shot iterator over a module's parameters."""
        ctx = self.ctx
        if isinstance(value, ast.GeneratorExp):
            return any(self._generator(g.iter, scope) for g in value.generators)
        if not isinstance(value, ast.Call):
            return False
        func = value.func
        last = last_name(func)
        if last not in _GENERATOR_METHODS and last not in _WRAPPER_NAMES:
            return False
        if isinstance(func, ast.Attribute) and func.attr in _GENERATOR_METHODS:
            return ctx.qualified_name(func, scope) is None and ctx.is_in_family(
                func.value, torchapi.MODULE, scope
            )
        name = (
            func.id
            if isinstance(func, ast.Name) and func.id not in ctx.imports
            else ctx.qualified_name(func, scope)
        )
        if name in _ONE_SHOT_WRAPPERS:
            return any(self._generator(a, scope) for a in value.args)
        return False

    def _judge(self, item: Item, name: str, uses: list[_Use]) -> None:
        # A use on the other side of an `if` from the assignment reads another value
        # (`if parameters is None: parameters = net.parameters()` / `else: len(parameters)`).
        arms = if_arms(self.ctx.tree)
        uses = [
            u
            for u in uses
            if not _exclusive(item.frames, u.frames)
            and not on_opposite_arms(arms, item.line, _line(u.call))
        ]
        # A freeze loop that drains first leaves later users only frozen parameters;
        # one that comes after a drain is still a user that gets nothing.
        start = next((i for i, u in enumerate(uses) if not u.freezes), len(uses))
        if start == len(uses):
            return
        first = uses[start]
        later = next(
            (
                u
                for u in uses[start + 1 :]
                if not _exclusive(first.frames, u.frames)
                and not on_opposite_arms(arms, _line(first.call), _line(u.call))
            ),
            None,
        )
        if later is None and not first.repeated:
            return
        ctx = self.ctx
        second = later if later is not None and not first.repeated else first
        node = item.node
        assert isinstance(node, ast.Assign)
        made = ctx.segment(node.value)
        made = made if len(made) <= 40 and "\n" not in made else "parameters()"
        if second is first:
            why = (
                f"`{_short(ctx, first.call)}` at line {_line(first.call)} runs in a loop "
                "and drains it on its first pass: every later pass sees no parameters"
            )
        else:
            why = (
                f"`{_short(ctx, first.call)}` at line {_line(first.call)} drains it, so "
                f"`{_short(ctx, second.call)}` at line {_line(second.call)} sees no "
                "parameters at all"
            )
        self.report(
            second.call,
            f"`{name}` (line {node.lineno}) holds a generator, `{made}`: {why}",
            fix_hint=f"Store a list: `{name} = list({made})`.",
            fix=Fix(
                "Store the parameters in a list",
                (ctx.replace(node.value, f"list({ctx.segment(node.value)})"),),
                Applicability.UNSAFE,
            ),
            evidence={"assigned_line": node.lineno},
        )


def _short(ctx: FileContext, node: ast.AST) -> str:
    text = ctx.segment(node)
    return text if len(text) <= 50 and "\n" not in text else text.split("(")[0] + "(...)"


def _line(node: ast.AST) -> int:
    return getattr(node, "lineno", 0)


def _loops(frames: tuple[Frame, ...]) -> set[int]:
    return {id(f.node) for f in frames if f.kind is FrameKind.LOOP}


def _exclusive(one: tuple[Frame, ...], other: tuple[Frame, ...]) -> bool:
    """Whether two places sit in different branches of one ``if`` (its body and its
    ``else``/``elif``): at most one of them runs."""
    branches = {id(f.node): f.kind for f in one if f.kind in _BRANCHES}
    return any(
        f.kind in _BRANCHES and branches.get(id(f.node), f.kind) is not f.kind for f in other
    )


_BRANCHES = frozenset({FrameKind.IF_BODY, FrameKind.IF_ELSE})


def _holds(argument: ast.expr, matches: object) -> bool:
    """Whether an argument is the value, directly or inside a literal container."""
    if matches(argument):  # type: ignore[operator]
        return True
    if isinstance(argument, ast.Starred):
        return _holds(argument.value, matches)
    if isinstance(argument, ast.Dict):
        return any(_holds(v, matches) for v in argument.values)
    if isinstance(argument, (ast.List, ast.Tuple, ast.Set)):
        return any(_holds(e, matches) for e in argument.elts)
    return False


def _consumers(items: list[Item], assigned: Item, matches: object) -> list[_Use]:
    """Calls and ``for`` loops after ``assigned`` that take the value as an argument."""
    outer = _loops(assigned.frames)
    uses = []
    position = (assigned.line, getattr(assigned.node, "col_offset", 0))
    for item in items:
        node = item.node
        if (item.line, getattr(node, "col_offset", 0)) <= position:
            continue
        if isinstance(node, ast.Call):
            name = getattr(node.func, "id", None)
            if name in _HARMLESS:
                continue
            if any(_holds(a, matches) for a in [*node.args, *(k.value for k in node.keywords)]):
                uses.append(_Use(node, bool(_loops(item.frames) - outer), item.frames))
    return uses


def _loop_uses(scope_node: ast.AST, assigned: Item, matches: object) -> list[_Use]:
    """``for p in params:`` loops (their iterables are not calls)."""
    found = []
    for node in ast.walk(scope_node):
        if (
            isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension))
            and matches(node.iter)  # type: ignore[operator]
            and getattr(node.iter, "lineno", 0) > assigned.line
        ):
            found.append(_Use(node.iter, False, freezes=_only_freezes(node)))
    return found


def _only_freezes(loop: ast.AST) -> bool:
    """Whether every statement of a ``for`` loop's body turns off ``requires_grad`` of its
    loop variable (``p.requires_grad = False`` or ``p.requires_grad_(False)``)."""
    if not isinstance(loop, (ast.For, ast.AsyncFor)) or loop.orelse:
        return False
    names = {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)}
    return all(_freeze_of(statement, names) for statement in loop.body)


def _freeze_of(statement: ast.stmt, names: set[str]) -> bool:
    """``p.requires_grad = False`` or ``p.requires_grad_(False)`` on a name of ``names``."""
    setting = requires_grad_setting(statement)
    if setting is None:
        return False
    what, trainable = setting
    return not trainable and isinstance(what, ast.Name) and what.id in names


def _name_uses(
    ctx: FileContext, items: list[Item], assigned: Item, name: str, scope: Scope
) -> list[_Use]:
    def matches(expr: ast.expr) -> bool:
        if not (isinstance(expr, ast.Name) and expr.id == name):
            return False
        found = ctx.lookup(expr, scope)
        return found is not None and found[0].node is assigned.node

    scope_node = scope.node if scope is not None else ctx.tree
    uses = _consumers(items, assigned, matches)
    if isinstance(scope_node, (ast.FunctionDef, ast.AsyncFunctionDef)) or scope is None:
        uses += [
            u
            for u in _loop_uses(scope_node, assigned, matches)
            if scope is not None or _top_level(ctx, u.call)
        ]
    return sorted(uses, key=lambda u: (_line(u.call), getattr(u.call, "col_offset", 0)))


def _top_level(ctx: FileContext, node: ast.AST) -> bool:
    line = _line(node)
    return not any(f.node.lineno <= line <= (f.node.end_lineno or 0) for f in ctx.module.functions)


def _attribute_uses(method: FunctionScope, assigned: Item, attr: str) -> list[_Use]:
    def matches(expr: ast.expr) -> bool:
        return (
            isinstance(expr, ast.Attribute)
            and expr.attr == attr
            and isinstance(expr.value, ast.Name)
            and expr.value.id == method.self_name
        )

    same = assigned in method.items
    uses = []
    for item in method.items:
        node = item.node
        if same and item.line <= assigned.line:
            continue
        if (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", None) not in _HARMLESS
            and any(_holds(a, matches) for a in [*node.args, *(k.value for k in node.keywords)])
        ):
            uses.append(_Use(node, bool(_loops(item.frames))))
    return uses
