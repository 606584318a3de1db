"""What the traversal records about a file's shape: frames, loops, functions, classes.

The engine fills these while it walks the tree once. Rules read them, mostly in their
scope-end hooks (``leave_loop``, ``leave_function``, ``leave_module``), to ask questions
about order ("does ``zero_grad()`` run between ``backward()`` and ``step()``?") and
nesting ("is this call inside an ``if`` inside the loop?") without walking the tree again.
"""

from __future__ import annotations

import ast
import enum
from collections.abc import Iterator
from dataclasses import dataclass, field

__all__ = ["ClassScope", "Frame", "FrameKind", "FunctionScope", "Item", "Loop", "ModuleScope"]


class FrameKind(enum.Enum):
    """The kind of block a statement or call sits in."""

    MODULE = "module"
    CLASS = "class"
    FUNCTION = "function"
    LOOP = "loop"
    IF_BODY = "if"
    IF_ELSE = "else"
    WITH = "with"
    TRY = "try"
    EXCEPT = "except"


@dataclass(slots=True, eq=False)
class Frame:
    """One enclosing block. Compared by identity: two frames are the same block or not."""

    kind: FrameKind
    node: ast.AST


@dataclass(slots=True, eq=False)
class Item:
    """A call or a statement the engine recorded, with the blocks around it.

    ``frames`` runs from the module down to the innermost block. Items are recorded for
    calls, assignments (``=``, ``+=``, annotated) and the jumps ``return``, ``break``,
    ``continue``, in source order (a statement comes before the calls inside it).
    """

    node: ast.AST
    frames: tuple[Frame, ...]

    @property
    def line(self) -> int:
        """The 1-based line of the node."""
        return getattr(self.node, "lineno", 0)


@dataclass(eq=False, slots=True)
class Loop:
    """A ``for``/``async for``/``while`` loop and everything it runs.

    Attributes:
        node: the loop statement.
        frame: the loop's own frame (items inside the loop have it in ``frames``).
        function: the function the loop is in, ``None`` at module level.
        parent: the enclosing loop in the same function, if any.
        items: every recorded item of the loop in source order, including those of
            nested loops but not of functions or classes defined inside it.
        children: loops nested directly inside this one.
    """

    node: ast.For | ast.AsyncFor | ast.While
    frame: Frame
    function: FunctionScope | None
    parent: Loop | None
    items: list[Item] = field(default_factory=list)
    children: list[Loop] = field(default_factory=list)
    _cache: dict[str, object] = field(default_factory=dict, repr=False)

    @property
    def line(self) -> int:
        """The line of the ``for``/``while`` keyword."""
        return self.node.lineno

    def inner_frames(self, item: Item) -> tuple[Frame, ...]:
        """The frames of ``item`` inside this loop (empty for a statement of the body)."""
        frames = item.frames
        for index in range(len(frames) - 1, -1, -1):
            if frames[index] is self.frame:
                return frames[index + 1 :]
        return ()

    def is_direct(self, item: Item) -> bool:
        """Whether ``item`` belongs to this loop rather than to a loop nested in it."""
        return not any(frame.kind is FrameKind.LOOP for frame in self.inner_frames(item))

    def is_unconditional(self, item: Item) -> bool:
        """Whether ``item`` runs on every iteration: no ``if``/``try``/nested loop around it."""
        return all(frame.kind is FrameKind.WITH for frame in self.inner_frames(item))


@dataclass(eq=False, slots=True)
class FunctionScope:
    """A function or method.

    Attributes:
        node: the ``def``/``async def`` statement.
        frame: its frame.
        owner: the class it is defined in (a method), if any.
        parent: the function it is nested in, if any.
        items: recorded items of its body (not of nested functions or classes).
        loops: loops directly in its body, outermost first.
    """

    node: ast.FunctionDef | ast.AsyncFunctionDef
    frame: Frame
    owner: ClassScope | None
    parent: FunctionScope | None
    items: list[Item] = field(default_factory=list)
    loops: list[Loop] = field(default_factory=list)

    @property
    def name(self) -> str:
        """The function's name."""
        return self.node.name

    @property
    def self_name(self) -> str | None:
        """The name of the instance parameter of a method (usually ``self``)."""
        if self.owner is None:
            return None
        for decorator in self.node.decorator_list:
            if isinstance(decorator, ast.Name) and decorator.id in ("staticmethod", "classmethod"):
                return None
        args = self.node.args.posonlyargs + self.node.args.args
        return args[0].arg if args else None

    @property
    def parameter_names(self) -> set[str]:
        """Every named parameter (positional-only, positional, keyword-only)."""
        args = self.node.args
        return {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}

    @property
    def parameter_defaults(self) -> dict[str, ast.expr]:
        """Each parameter that has a default, with it (positional and keyword-only)."""
        args = self.node.args
        positional = args.posonlyargs + args.args
        defaulted = positional[len(positional) - len(args.defaults) :]
        defaults = {a.arg: d for a, d in zip(defaulted, args.defaults, strict=True)}
        defaults.update(
            (a.arg, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d
        )
        return defaults

    def positional_names(self, call: ast.Call) -> list[str]:
        """The parameters ``call``'s positional arguments fill, in order (without the
        instance parameter when the call is ``obj.method(...)``, or a constructor)."""
        names = [a.arg for a in self.node.args.posonlyargs + self.node.args.args]
        bound = isinstance(call.func, ast.Attribute) or self.name == "__init__"
        return names[1:] if self.self_name is not None and bound else names

    def argument_for(self, call: ast.Call, name: str) -> ast.expr | None:
        """What ``call`` passes for the parameter ``name`` (by keyword or by position);
        ``None`` when it passes nothing for it or a ``*args`` hides the position."""
        value = next((k.value for k in call.keywords if k.arg == name), None)
        if value is not None:
            return value
        names = self.positional_names(call)
        if name not in names:
            return None
        index = names.index(name)
        if index >= len(call.args) or any(
            isinstance(a, ast.Starred) for a in call.args[: index + 1]
        ):
            return None
        return call.args[index]


@dataclass(eq=False, slots=True)
class ClassScope:
    """A class definition and its methods."""

    node: ast.ClassDef
    frame: Frame
    methods: dict[str, FunctionScope] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """The class name."""
        return self.node.name


@dataclass(eq=False, slots=True)
class ModuleScope:
    """The whole file: its functions, classes, loops and module-level items."""

    node: ast.Module
    frame: Frame
    items: list[Item] = field(default_factory=list)
    loops: list[Loop] = field(default_factory=list)
    functions: list[FunctionScope] = field(default_factory=list)
    classes: list[ClassScope] = field(default_factory=list)
    all_loops: list[Loop] = field(default_factory=list)

    def release(self) -> None:
        """Unlink the scopes from each other (a class and its methods, a function and
        its loops, a loop and the loops inside it), for when the file is done: without
        those cycles, reference counting frees the file's structure at once, where the
        cycle collector would have to walk all of it first."""
        for loop in self.all_loops:
            loop.children.clear()
        for function in self.functions:
            function.loops.clear()
        for cls in self.classes:
            cls.methods.clear()

    def bodies(self) -> Iterator[tuple[FunctionScope | None, list[Item]]]:
        """The module's own items (scope ``None``), then each function's, in file order."""
        yield None, self.items
        for function in self.functions:
            yield function, function.items
