"""Command-line flags that cannot be turned off: TD913 argparse-type-bool.

``parser.add_argument("--eval", type=bool, default=True)`` hands the command-line text to
``bool()``, and every non-empty string is true, ``"False"`` and ``"0"`` included: ``--eval
False`` turns the option on. With ``default=True`` the option cannot be switched off at
all, so a run asked to skip pre-training, evaluation or augmentation silently does it
anyway (a warning); with a false default, ``--flag True`` works and only ``--flag False``
misleads (information).
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Callable
from typing import cast

from torchdoctor.findings import Depth, Severity
from torchdoctor.rules.detectors import detector
from torchdoctor.static.analysis.calls import keyword, last_name
from torchdoctor.static.analysis.related_files import first_in_imported_files
from torchdoctor.static.context import FileContext
from torchdoctor.static.rules.base import LintRule


@detector("TD913", depth=Depth.LINT)
class ArgparseTypeBool(LintRule):
    """``add_argument(..., type=bool)``: any text given on the command line is true."""

    requires = ("add_argument",)
    call_names = frozenset({"add_argument"})

    def visit_call(self, node: ast.Call) -> None:
        func = node.func
        if not (isinstance(func, ast.Attribute) and func.attr == "add_argument"):
            return
        given = keyword(node, "type")
        if not (isinstance(given, ast.keyword) and isinstance(given.value, ast.Name)):
            return
        if given.value.id != "bool" or "bool" in self.ctx.imports:
            return
        flag = _long_flag(node) or "the option"
        default = keyword(node, "default")
        on = (
            default is not None
            and isinstance(default.value, ast.Constant)
            and bool(default.value.value)
        )
        effect = (
            f"with `default=True`, `{flag}` cannot be turned off from the command line: "
            f"`{flag} False` leaves it on"
            if on
            else f"`{flag} False` turns it on"
        )
        dest = _destination(node, flag)
        converting = _converting_parser(self.ctx, func.value)
        if converting is not None:
            self.report(
                given.value,
                f"`{flag}` is declared with `type=bool` at line {node.lineno}, on a parser "
                f"that may be the project's `{converting}`, whose own `add_argument` can "
                'convert the type (plain argparse would read "False" as true)',
                fix_hint="Nothing to change if the project's parser handles `type=bool`; "
                'otherwise use `action="store_true"` or a converter that reads the text.',
                severity=Severity.INFO,
            )
            return
        overwritten = _assigned_in_program(self.ctx, dest)
        switch = _off_switch(self.ctx, dest, node) if on else None
        if switch is not None:
            effect = (
                f"`{flag} False` leaves it on; only `{switch}` (a `store_false` into the same "
                f"`.{dest}`) turns it off"
            )
        unread = overwritten is None and _never_read(self.ctx, dest)
        if overwritten is not None:
            path, line = overwritten
            effect += (
                f"; but the program sets `.{dest}` itself ({path}:{line}) without reading "
                "it, so the flag's value is overwritten and changes nothing"
            )
        elif unread:
            effect += f"; but nothing in the program reads `.{dest}`, so the flag changes nothing"
        self.report(
            given.value,
            f"`{flag}` is declared with `type=bool` at line {node.lineno}: argparse passes "
            "the command-line text to `bool()`, and every non-empty string is true, "
            f'"False" and "0" included, so {effect}',
            fix_hint='Use `action="store_true"` (or `action=argparse.BooleanOptionalAction` '
            "for `--flag`/`--no-flag`), or a converter that reads the text "
            '(`type=lambda s: s.lower() in ("1", "true", "yes")`).',
            severity=None
            if on and not unread and overwritten is None and switch is None
            else Severity.INFO,
        )


_ARGUMENT_PARSER = "argparse.ArgumentParser"


def _converting_parser(ctx: FileContext, receiver: ast.expr) -> str | None:
    """The name of a class of the project that derives from ``argparse.ArgumentParser``
    and overrides ``add_argument`` (ParlAI's ``ParlaiParser`` turns ``type=bool`` into
    its registered ``"bool"`` converter, for its argument groups too), when
    ``receiver`` may be one: an instance of it, a group it made, or a parser the file
    does not show (a parameter), in a file of the class's source tree or one importing
    its package. ``None`` when the file builds the receiver as a plain
    ``argparse.ArgumentParser`` or no such class is near."""

    def overriding() -> tuple[tuple[str, str, str], ...]:
        found = []
        for cls in ctx.project.classes():
            if cls.subclasses(_ARGUMENT_PARSER) and "add_argument" in cls.methods:
                top = cls.qualname.partition(".")[0]
                # the folder holding the class's top-level package: its source tree
                root, path = os.path.dirname(os.path.abspath(cls.path)), cls.qualname
                for _ in range(path.count(".") - 1):
                    root = os.path.dirname(root)
                found.append((cls.name, top, root))
        return tuple(sorted(found))

    near = [
        name
        for name, top, root in ctx.project.remember("TD913-converting-parsers", overriding)
        if os.path.abspath(ctx.path).startswith(root + os.sep)
        or any(i == top or i.startswith(top + ".") for i in ctx.imports.values())
    ]
    if not near:
        return None
    parser = _parser_of(ctx, receiver)
    type_name = ctx.instance_type(parser) if parser is not None else None
    if type_name is None:
        return near[0]
    bare = type_name.rpartition(".")[2]
    return bare if bare in near else None


def _parser_of(ctx: FileContext, receiver: ast.expr) -> ast.expr | None:
    """The parser ``receiver`` adds to: itself, or for a group
    (``group = parser.add_argument_group(...)``) the parser that made it."""
    for _ in range(3):
        if not isinstance(receiver, ast.Name):
            return receiver
        found = ctx.lookup(receiver)
        value = found[0].value if found is not None else None
        if not (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Attribute)
            and value.func.attr in ("add_argument_group", "add_mutually_exclusive_group")
        ):
            return receiver
        receiver = value.func.value
    return receiver


_PARSES = frozenset({"parse_args", "parse_known_args"})


def _never_read(ctx: FileContext, dest: str) -> bool:
    """The script parses its own options into names (``args = parser.parse_args()``),
    reads those only attribute by attribute (never ``vars(args)``, ``train(args)``,
    ``return args``), and no attribute or text of the file is ``dest``: the option is
    parsed and dropped (smoothing-adversarial's ``--random-start``, which the attacks
    never take). Parsed results handed on whole may be read anywhere: not proved."""
    key = ("argparse_flags", "read_only_by_attribute")
    if key not in ctx.memo:
        ctx.memo[key] = _read_only_by_attribute(ctx.tree)
    readable = cast("frozenset[str] | None", ctx.memo[key])
    return readable is not None and dest not in readable


def _read_only_by_attribute(tree: ast.AST) -> frozenset[str] | None:
    """Every attribute name and text of the file, when the names it binds parsed options
    to are read only through attributes; ``None`` when some parse's result, or such a
    name, goes anywhere else (or the file parses nothing)."""
    nodes = list(ast.walk(tree))
    parses = {
        id(node) for node in nodes if isinstance(node, ast.Call) and last_name(node.func) in _PARSES
    }
    parsed: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Assign) and id(node.value) in parses:
            parses.discard(id(node.value))
            for target in node.targets:
                elements = target.elts if isinstance(target, ast.Tuple) else [target]
                if not all(isinstance(e, ast.Name) for e in elements):
                    return None  # `self.args = ...`: read wherever the object goes
                parsed.update(cast("ast.Name", e).id for e in elements)
    if not parsed or parses:
        return None  # `return parser.parse_args()`: read wherever it goes
    read_through = {id(node.value) for node in nodes if isinstance(node, ast.Attribute)}
    names: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Attribute):
            names.add(node.attr)
            if node.attr.startswith("__") and getattr(node.value, "id", None) in parsed:
                return None  # `args.__dict__`: the whole namespace
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names.add(node.value)
        elif (
            isinstance(node, ast.Name)
            and node.id in parsed
            and isinstance(node.ctx, ast.Load)
            and id(node) not in read_through
        ):
            return None  # handed on whole: `train(args)`, `vars(args)`
    return frozenset(names)


def _off_switch(ctx: FileContext, dest: str, option: ast.Call) -> str | None:
    """Another option of the file that stores False into the same attribute
    (``parser.add_argument("--dont_recenter", dest="recenter", action="store_false")``,
    Stable DreamFusion): the flag can be turned off from the command line after all."""
    for node in ast.walk(ctx.tree):
        if not (
            isinstance(node, ast.Call)
            and node is not option
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "add_argument"
        ):
            continue
        action = keyword(node, "action")
        if not (
            action is not None
            and isinstance(action.value, ast.Constant)
            and action.value.value == "store_false"
        ):
            continue
        flag = _long_flag(node)
        if flag and _destination(node, flag) == dest:
            return flag
    return None


def _long_flag(call: ast.Call) -> str:
    """The option's name: its long flag (`"-t", "--trim_just_beginning_and_end"`: the long
    name says what the option is, and argparse derives the attribute it sets from it),
    else its first name; empty when it has none written out."""
    names = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    return next((n for n in names if n.startswith("--")), names[0] if names else "")


def _assigned_in_program(ctx: FileContext, dest: str) -> tuple[str, int] | None:
    """Where the script, or a module of the project it imports, assigns ``.<dest>``
    without reading it (see :func:`_assignment_finder`); ``None`` if nowhere. Sibling
    scripts are other programs: their assignments do not count."""
    find = _assignment_finder(dest)
    own = find(ctx.path, ctx.source.encode("utf-8", "replace"))
    return own if own is not None else first_in_imported_files(ctx, find)


def _destination(call: ast.Call, flag: str) -> str:
    """The attribute argparse stores the option in: ``dest=``, else the long flag's name
    with dashes made underscores."""
    dest = keyword(call, "dest")
    if (
        dest is not None
        and isinstance(dest.value, ast.Constant)
        and isinstance(dest.value.value, str)
    ):
        return dest.value.value
    return flag.lstrip("-").replace("-", "_")


def _assignment_finder(dest: str) -> Callable[[str, bytes], tuple[str, int] | None]:
    """A search for ``<obj>.<dest> = value`` whose value does not read ``.<dest>``: the
    program setting the option itself (``args.distributed = True`` in a helper that reads
    the environment), not refining it (``args.use_gpu = args.use_gpu and cuda``)."""
    name = re.escape(dest.encode())
    # `args.distributed = True`: a plain name's attribute, not `self.detector = ...` (an
    # object's own attribute that merely shares the option's name)
    assigned = re.compile(rb"(?<![\w.])(?!self\b)[A-Za-z_]\w*\s*\.\s*" + name + rb"\s*=(?!=)(.*)")
    read = re.compile(rb"\b" + name + rb"\b")

    def find(path: str, data: bytes) -> tuple[str, int] | None:
        if dest.encode() not in data:
            return None
        for number, line in enumerate(data.splitlines(), 1):
            code = line.split(b"#", 1)[0]
            match = assigned.search(code)
            if match is not None and not read.search(match.group(1)):
                return os.path.relpath(path), number
        return None

    return find
