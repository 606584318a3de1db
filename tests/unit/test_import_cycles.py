"""No import circle in torchdoctor and no import up a floor, counting imports inside
functions and under TYPE_CHECKING: a circle means two modules that cannot be understood
(or tested, or loaded) one without the other; an import up a floor means a lower layer
that knows a higher one."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import torchdoctor

SOURCE = Path(torchdoctor.__file__).parent
PACKAGE = "torchdoctor"

# Imports that close a known circle, each to be removed (here and in the code) when its
# circle is broken. The list may only shrink, and every circle known when this test was
# written is broken now, so it stays empty: an import circle fails the test.
KNOWN_BACK_EDGES: frozenset[tuple[str, str]] = frozenset()


def _module_name(path: Path) -> str:
    parts = [PACKAGE, *path.relative_to(SOURCE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in SOURCE.rglob("*.py")}


def _imports(path: Path, name: str, modules: dict[str, Path]) -> set[str]:
    """Every torchdoctor module ``path`` imports, wherever the import statement is."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".")
                anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                for alias in node.names
            ]
        else:
            continue
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target.startswith(PACKAGE + ".") and target != name:
                found.add(target)
    return found


@functools.cache
def import_graph() -> dict[str, set[str]]:
    """Module -> the torchdoctor modules it imports (computed once; do not mutate)."""
    modules = _modules()
    return {name: _imports(path, name, modules) for name, path in modules.items()}


def circles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    counter = 0

    def visit(root: str) -> None:
        nonlocal counter
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return found


def test_the_graph_sees_function_level_and_type_checking_imports() -> None:
    graph = import_graph()
    assert "torchdoctor.static" in graph["torchdoctor"]  # inside lint()
    assert "torchdoctor.runtime.watch" in graph["torchdoctor"]  # under TYPE_CHECKING


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [frozenset({"a", "b", "c"})]


def test_no_import_circle_beyond_the_known_ones() -> None:
    graph = {
        name: targets - {b for a, b in KNOWN_BACK_EDGES if a == name}
        for name, targets in import_graph().items()
    }
    found = [sorted(c) for c in circles(graph)]
    assert not found, "import circles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_the_known_back_edges_still_exist_and_still_close_a_circle() -> None:
    """A known import that is gone, or no longer part of a circle, must leave the list."""
    graph = import_graph()
    in_circles = set().union(*circles(graph)) if circles(graph) else set()
    stale = sorted(
        (a, b) for a, b in KNOWN_BACK_EDGES if b not in graph.get(a, set()) or a not in in_circles
    )
    assert not stale, f"remove from KNOWN_BACK_EDGES: {stale}"


# The floor plan, lowest first: a module imports only modules of its own floor or below.
# A package is named by its prefix; the longest prefix that matches decides. Every module
# must fall on a floor: a new top-level module or package gets a line here.
FLOORS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "data model",
        (
            "torchdoctor.__about__",
            "torchdoctor.errors",
            "torchdoctor.facts",
            "torchdoctor.findings",
            "torchdoctor._torch",
            "torchdoctor.progress",
            "torchdoctor.outputs",
        ),
    ),
    ("catalogue", ("torchdoctor.rules",)),
    (
        "kernel and renderers",
        ("torchdoctor._kernel", "torchdoctor._usercode", "torchdoctor.report"),
    ),
    (
        "the depths",
        ("torchdoctor.static", "torchdoctor.runtime", "torchdoctor.ckpt", "torchdoctor.env"),
    ),
    (
        "distributed, custom, integrations",
        ("torchdoctor.distributed", "torchdoctor.custom", "torchdoctor.integrations"),
    ),
    ("preflight", ("torchdoctor.preflight",)),
    (
        "API and CLI",
        (
            "torchdoctor.__init__",  # the package itself: the public API
            "torchdoctor.__main__",  # `python -m torchdoctor`: the CLI
            "torchdoctor.cli",
            "torchdoctor.demo",
            "torchdoctor.pytest_plugin",
            "torchdoctor.testing",
        ),
    ),
)


def floor_of(module: str) -> int | None:
    """The index in :data:`FLOORS` of ``module``'s floor, ``None`` when it has none."""
    name = "torchdoctor.__init__" if module == PACKAGE else module
    best: tuple[int, int] | None = None
    for index, (_, prefixes) in enumerate(FLOORS):
        for prefix in prefixes:
            if (name == prefix or name.startswith(prefix + ".")) and (
                best is None or len(prefix) > best[1]
            ):
                best = (index, len(prefix))
    return None if best is None else best[0]


def imports_up(graph: dict[str, set[str]]) -> list[str]:
    """Every import of a module on a higher floor than the importer's."""
    found = []
    for module, targets in sorted(graph.items()):
        for target in sorted(targets):
            low, high = floor_of(module), floor_of(target)
            if low is not None and high is not None and high > low:
                found.append(f"{module} ({FLOORS[low][0]}) -> {target} ({FLOORS[high][0]})")
    return found


def test_every_module_is_on_a_floor() -> None:
    homeless = sorted(name for name in import_graph() if floor_of(name) is None)
    assert not homeless, f"add these to FLOORS: {homeless}"


def test_the_floor_check_sees_an_import_up() -> None:
    graph = {"torchdoctor.runtime.dispatch": {"torchdoctor.custom", "torchdoctor.findings"}}
    assert imports_up(graph) == [
        "torchdoctor.runtime.dispatch (the depths) -> torchdoctor.custom "
        "(distributed, custom, integrations)"
    ]


def test_no_import_runs_up_a_floor() -> None:
    found = imports_up(import_graph())
    assert not found, "imports up a floor:\n" + "\n".join(found)
