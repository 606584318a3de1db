"""Where a value goes: into training, or only into a summary of it.

:func:`destination` follows an expression forward: up through the expressions that hold
it (``x.double().mean()``, ``[a, b]``, ``torch.cat(...)``), then on through what it is
assigned to (the uses of that name), the parameter of a function of this file it is passed
to, the callers of a function that returns it, and the names a ``for`` loop over it binds.
Every place it ends is one of:

* :attr:`Destination.TRAINING`: a model call (anything called that is a module, a loss or a
  value called like a model), ``backward()``, a parameter or buffer, an optimizer;
* :attr:`Destination.SUMMARY`: a Python number or text (``.item()``, ``float()``,
  ``print``, an f-string, a logger), a comparison or an ``if`` test, an accumulator
  (``total += ...``);
* :attr:`Destination.UNKNOWN`: somewhere the file does not show (an attribute, a function
  of another module, a ``return`` nobody here calls);
* :attr:`Destination.UNUSED`: nowhere: the value is never read.

A value's answer is its strongest place (one path into training is enough). TD102 uses it
to tell float64 data and models from float64 statistics.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Iterator
from typing import cast

from torchdoctor.static import torchapi
from torchdoctor.static.analysis.sinks import (
    CONTAINER_FILLS,
    Destination,
    Reach,
    attribute_use,
    builtin_use,
    method_use,
    qualified_use,
    receiver_use,
)
from torchdoctor.static.context import FileContext, Scope
from torchdoctor.static.structure import FunctionScope

__all__ = ["Destination", "Reach", "destination"]

_UNUSED: Reach = (Destination.UNUSED, None)
_MAX_HOPS = 16
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef)


Ends = Callable[[ast.Call, ast.AST, Scope], bool]
"""Calls past which a rule no longer follows the value (TD102: a cast to another dtype)."""


def destination(ctx: FileContext, expr: ast.expr, scope: Scope, ends: Ends | None = None) -> Reach:
    """Where the value of ``expr`` (in ``scope``) goes, and the node that decided it; a call
    ``ends`` accepts (with the value's node, its receiver or argument) counts as a summary."""
    return _Follower(ctx, ends).value(expr, scope, 0)


class _Follower:
    """One question's walk: the file's parent links and name uses, and the bindings seen."""

    def __init__(self, ctx: FileContext, ends: Ends | None = None) -> None:
        self.ctx = ctx
        self.ends = ends
        self.parents, self.names = _index(ctx)
        self.seen: set[int] = set()
        # The calls a value was passed into, innermost last: where a return goes back to.
        self.entered: list[tuple[FunctionScope, ast.Call, Scope]] = []

    # --- a value, up through the expressions around it ------------------------------------

    def value(self, node: ast.AST, scope: Scope, hops: int) -> Reach:
        """Where the value of ``node`` goes from where it stands."""
        while True:
            parent = self.parents.get(id(node))
            if parent is None:
                return Destination.UNKNOWN, None
            step = self._step(node, parent, scope, hops)
            if isinstance(step, tuple):
                return step
            node = step

    def _step(self, node: ast.AST, parent: ast.AST, scope: Scope, hops: int) -> Reach | ast.AST:
        """One level up: a final answer, or the node whose value carries ``node``'s on."""
        call = self.parents.get(id(parent)) if isinstance(parent, ast.Attribute) else parent
        if self.ends is not None and isinstance(call, ast.Call) and self.ends(call, node, scope):
            return Destination.SUMMARY, call
        if isinstance(parent, ast.Call):
            if node is parent.func:
                return Destination.TRAINING, parent  # the value is called: a model
            return self._argument(parent, node, scope, hops)
        if isinstance(parent, ast.keyword):
            return parent
        if isinstance(parent, ast.Attribute):
            return self._attribute(parent)
        if isinstance(parent, ast.Subscript):
            return self._subscript(node, parent)
        if isinstance(parent, (ast.Compare, ast.JoinedStr, ast.FormattedValue, ast.Slice)):
            return Destination.SUMMARY, parent
        if isinstance(parent, ast.IfExp) and node is parent.test:
            return Destination.SUMMARY, parent
        if isinstance(parent, ast.comprehension):
            return (
                (Destination.SUMMARY, parent)
                if node in parent.ifs
                else self.parents.get(id(parent), parent)
            )
        if isinstance(
            parent,
            (
                ast.BinOp,
                ast.UnaryOp,
                ast.BoolOp,
                ast.IfExp,
                ast.Tuple,
                ast.List,
                ast.Set,
                ast.Dict,
                ast.Starred,
                ast.Await,
                ast.ListComp,
                ast.SetComp,
                ast.DictComp,
                ast.GeneratorExp,
            ),
        ):
            return parent
        if isinstance(parent, ast.NamedExpr):
            return _strongest(
                (self.name(parent.target, scope, hops), self.value(parent, scope, hops))
            )
        return self._statement(node, parent, scope, hops)

    def _attribute(self, attribute: ast.Attribute) -> Reach | ast.AST:
        """``value.method(...)`` or ``value.attr``."""
        call = self.parents.get(id(attribute))
        if not (isinstance(call, ast.Call) and call.func is attribute):
            use = attribute_use(attribute.attr)
            return attribute if use is None else (use, attribute)
        use = receiver_use(attribute.attr)
        return call if use is None else (use, call)

    def _subscript(self, node: ast.AST, subscript: ast.Subscript) -> Reach | ast.AST:
        if node is not subscript.value:
            return Destination.SUMMARY, subscript  # used as an index
        if isinstance(subscript.ctx, ast.Load):
            return subscript
        statement = self.parents.get(id(subscript))
        if isinstance(statement, ast.AugAssign):
            return Destination.SUMMARY, statement  # counts[y] += 1: an accumulator
        return _UNUSED  # written into, not read

    # --- a value passed to a call ----------------------------------------------------------

    def _argument(self, call: ast.Call, node: ast.AST, scope: Scope, hops: int) -> Reach | ast.AST:
        """``f(value)``: what the callee does with it, or the value the call makes."""
        ctx = self.ctx
        func = call.func
        qualified = ctx.qualified_name(func, scope)
        if qualified is not None:
            use = qualified_use(qualified)
            return call if use is None else (use, call)
        found = (
            ctx.family_of(func, scope)
            if isinstance(func, (ast.Name, ast.Attribute, ast.Subscript))
            else None
        )
        if found is not None and found[0] in (torchapi.MODULE, torchapi.LOSS):
            return Destination.TRAINING, call
        callee = ctx.resolve_local_call(call, scope)
        if callee is not None:
            # A value passed in and returned comes back out of this call, not out of
            # every call of the function (a helper used on many values).
            self.entered.append((callee, call, scope))
            try:
                return self._parameter(callee, call, node, hops)
            finally:
                self.entered.pop()
        if isinstance(func, ast.Name):
            if ctx.local_class(func.id) is not None:
                return call  # an object of this file built from the value
            use = builtin_use(func.id)
            return call if use is None else (use, call)
        if isinstance(func, ast.Attribute):
            use = method_use(func.attr)
            if use is not None:
                return use, call
            if func.attr in CONTAINER_FILLS and isinstance(func.value, ast.Name):
                return self.name(func.value, scope, hops)  # into a list: the list's uses
        return Destination.UNKNOWN, call

    def _parameter(
        self, function: FunctionScope, call: ast.Call, node: ast.AST, hops: int
    ) -> Reach:
        """An argument of a function of this file: where its parameter goes there."""
        args = function.node.args
        params = args.posonlyargs + args.args
        if function.self_name is not None and isinstance(call.func, ast.Attribute):
            params = params[1:]
        param = None
        if isinstance(node, ast.keyword):
            param = next((p for p in params + args.kwonlyargs if p.arg == node.arg), None)
        elif node in call.args and not any(isinstance(a, ast.Starred) for a in call.args):
            index = call.args.index(node)
            param = params[index] if index < len(params) else None
        if param is None:
            return Destination.UNKNOWN, call
        return self.binding_uses(param, param.arg, function, hops + 1)

    # --- the statement that holds the value ------------------------------------------------

    def _statement(self, node: ast.AST, statement: ast.AST, scope: Scope, hops: int) -> Reach:
        if isinstance(statement, ast.Expr):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("double", "to", "type")
            ):
                return Destination.TRAINING, node  # model.double(): modules convert in place
            return _UNUSED
        if isinstance(statement, (ast.Assign, ast.AnnAssign)):
            return self._assigned(node, statement, scope, hops)
        if isinstance(statement, ast.AugAssign):
            target = statement.target
            return _strongest(
                [(Destination.SUMMARY, statement)]
                + ([self.name(target, scope, hops)] if isinstance(target, ast.Name) else [])
            )
        if isinstance(statement, ast.Return):
            return self._returned(statement, hops)
        if isinstance(statement, (ast.If, ast.While, ast.Assert, ast.Raise)):
            return Destination.SUMMARY, statement
        if isinstance(statement, (ast.For, ast.AsyncFor)) and node is statement.iter:
            return self._iterated(statement, scope, hops)
        if isinstance(statement, ast.Delete):
            return _UNUSED
        return Destination.UNKNOWN, statement

    def _assigned(
        self, node: ast.AST, statement: ast.Assign | ast.AnnAssign, scope: Scope, hops: int
    ) -> Reach:
        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        return _strongest(self._target(target, statement, scope, hops) for target in targets)

    def _target(self, target: ast.expr, statement: ast.stmt, scope: Scope, hops: int) -> Reach:
        if isinstance(target, ast.Name):
            return self.binding_uses(statement, target.id, scope, hops + 1)
        if isinstance(target, (ast.Tuple, ast.List)):
            return _strongest(self._target(e, statement, scope, hops) for e in target.elts)
        if isinstance(target, ast.Attribute) and target.attr in ("data", "grad"):
            return Destination.TRAINING, statement  # p.data = ...: a parameter
        if isinstance(target, ast.Subscript):
            root = target.value
            while isinstance(root, (ast.Subscript, ast.Attribute)):
                root = root.value
            if isinstance(root, ast.Name):
                return self.name(root, scope, hops)  # results["loss"] = ...: the dict's uses
        if isinstance(target, ast.Starred):
            return self._target(target.value, statement, scope, hops)
        return Destination.UNKNOWN, statement

    def _returned(self, statement: ast.Return, hops: int) -> Reach:
        function = self._function_of(statement)
        if not isinstance(function, FunctionScope):
            return Destination.UNKNOWN, statement
        for callee, call, caller in reversed(self.entered):
            if callee is function:
                if hops >= _MAX_HOPS:
                    return Destination.UNKNOWN, statement
                return self.value(call, caller, hops + 1)
        calls = [(item.node, scope) for scope, item in self.ctx.callers(function)]
        calls += self._alias_calls(function)
        if not calls or hops >= _MAX_HOPS:
            return Destination.UNKNOWN, statement
        if id(function) in self.seen:
            return _UNUSED  # its callers are being followed already
        self.seen.add(id(function))
        return _strongest(self.value(call, scope, hops + 1) for call, scope in calls)

    def _alias_calls(self, function: FunctionScope) -> list[tuple[ast.AST, Scope]]:
        """Calls of ``function`` through a name it is assigned to (``fn = linear_schedule``
        in one branch of an ``if``, then ``fn(...)``): each such call, with its scope."""
        found: list[tuple[ast.AST, Scope]] = []
        for use in self.names.get(function.node.name, ()):
            value: ast.AST = use
            statement = self.parents.get(id(use))
            while isinstance(statement, ast.IfExp) and value is not statement.test:
                value, statement = statement, self.parents.get(id(statement))
            if not (
                isinstance(statement, ast.Assign)
                and statement.value is value
                and len(statement.targets) == 1
                and isinstance(statement.targets[0], ast.Name)
            ):
                continue
            # Any call of that name in the same function: each branch binds it anew, so
            # the binding a call reads may be another branch's.
            scope = self._function_of(statement)
            for alias in self.names.get(statement.targets[0].id, ()):
                call = self.parents.get(id(alias))
                if (
                    isinstance(call, ast.Call)
                    and call.func is alias
                    and self._function_of(alias) is scope
                ):
                    found.append((call, scope))
        return found

    def _iterated(self, loop: ast.For | ast.AsyncFor, scope: Scope, hops: int) -> Reach:
        return _strongest(
            self.binding_uses(loop, name.id, scope, hops + 1)
            for name in ast.walk(loop.target)
            if isinstance(name, ast.Name)
        )

    # --- names -------------------------------------------------------------------------

    def name(self, name: ast.Name, scope: Scope, hops: int) -> Reach:
        """Where the value a name holds at ``name`` goes (all uses of that binding)."""
        found = self.ctx.lookup(name, scope)
        if found is None:
            return Destination.UNKNOWN, name
        return self.binding_uses(found[0].node, name.id, found[1], hops + 1)

    def binding_uses(self, binder: ast.AST, name: str, scope: Scope, hops: int) -> Reach:
        """Where a binding's value goes: the strongest place among the uses of ``name``
        that read the binding ``binder`` makes (an assignment, a ``for``, a parameter)."""
        if id(binder) in self.seen or hops > _MAX_HOPS:
            return _UNUSED if id(binder) in self.seen else (Destination.UNKNOWN, binder)
        self.seen.add(id(binder))
        best = _UNUSED
        for use, use_scope in self._uses(binder, name):
            if isinstance(use.ctx, ast.Store):  # total += ...: accumulated into
                reach: Reach = (Destination.SUMMARY, use)
            else:
                reach = self.value(use, use_scope, hops)
            best = _strongest((best, reach))
            if best[0] is Destination.TRAINING:
                break
        return best

    def _uses(self, binder: ast.AST, name: str) -> Iterator[tuple[ast.Name, Scope]]:
        """Reads of ``name`` (and ``name += ...``) that resolve to ``binder``'s binding."""
        for use in self.names.get(name, ()):
            if isinstance(use.ctx, ast.Store) and not isinstance(
                self.parents.get(id(use)), ast.AugAssign
            ):
                continue
            function = self._function_of(use)
            found = self.ctx.lookup(use, function)
            if found is not None and (
                found[0].node is binder or self._branch_binding_reaches(binder, use, function)
            ):
                yield use, function

    def _branch_binding_reaches(self, binder: ast.AST, use: ast.Name, function: Scope) -> bool:
        """``binder`` is one branch's binding (``if a: x = f() else: x = g()``) and ``use``
        comes after the whole ``if``: the use may read it, whichever branch the lookup
        names."""
        branch = self.parents.get(id(binder))
        if not isinstance(branch, ast.If) or self._function_of(binder) is not function:
            return False
        outer: ast.AST = branch
        while isinstance(parent := self.parents.get(id(outer)), ast.If) and outer in parent.orelse:
            outer = parent  # the head of an if/elif chain
        return use.lineno > (getattr(outer, "end_lineno", None) or use.lineno)

    def _function_of(self, node: ast.AST) -> Scope:
        current = self.parents.get(id(node))
        while current is not None and not isinstance(current, _SCOPES):
            current = self.parents.get(id(current))
        return None if current is None else self.ctx.scopes.get(current)


def _strongest(reaches: Iterable[Reach]) -> Reach:
    """The strongest of some places (the first of equals); :attr:`Destination.UNUSED` for
    none."""
    return max(reaches, key=lambda reach: reach[0], default=_UNUSED)


def _index(ctx: FileContext) -> tuple[dict[int, ast.AST], dict[str, list[ast.Name]]]:
    """Parent links (by child id) and every ``Name`` node by identifier. Once per file."""
    key = ("destinations", "index")
    cached = ctx.memo.get(key)
    if cached is None:
        parents: dict[int, ast.AST] = {}
        names: dict[str, list[ast.Name]] = {}
        stack: list[ast.AST] = [ctx.tree]
        while stack:
            node = stack.pop()
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.expr_context):
                    continue  # Load/Store singletons: no value flows through them
                parents[id(child)] = node
                if isinstance(child, ast.Name):
                    names.setdefault(child.id, []).append(child)
                stack.append(child)
        cached = ctx.memo[key] = (parents, names)
    return cast("tuple[dict[int, ast.AST], dict[str, list[ast.Name]]]", cached)
