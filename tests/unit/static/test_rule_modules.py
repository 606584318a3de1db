"""static/rules holds rules only: a rule module imports analysis/, torchapi and base, never
another rule module, so that each rule can be read, changed and removed on its own."""

from __future__ import annotations

import ast
from pathlib import Path

import torchdoctor.static.rules as rules_package
from torchdoctor.rules.detectors import detector

RULES = Path(rules_package.__file__).parent
PACKAGE = "torchdoctor.static.rules"
ALLOWED = frozenset({f"{PACKAGE}.base"})


def _rule_modules() -> dict[str, Path]:
    return {path.stem: path for path in sorted(RULES.glob("*.py")) if path.stem != "__init__"}


def _imported(path: Path) -> set[str]:
    """The modules of static/rules that ``path`` imports, wherever the statement is."""
    found: set[str] = set()
    names = set(_rule_modules())
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith(PACKAGE + ".")}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # from . import x / from .x import y, inside static/rules
                base = ".".join(filter(None, (PACKAGE, base)))
            if base == PACKAGE:
                found |= {f"{PACKAGE}.{a.name}" for a in node.names if a.name in names}
            elif base.startswith(PACKAGE + "."):
                found.add(base)
    return found


def test_no_rule_module_imports_another() -> None:
    modules = _rule_modules()
    assert len(modules) > 20  # the folder was found
    crossing = {
        f"{name} -> {target}"
        for name, path in modules.items()
        for target in _imported(path) - ALLOWED
        if target != f"{PACKAGE}.{name}"
    }
    assert crossing == set(), "rule modules import each other; move the shared part to analysis/"


def test_every_module_but_base_registers_a_rule() -> None:
    """A module of static/rules without a ``@detector`` class is a helper: it belongs in
    static/analysis."""
    helpers = []
    for name, path in _rule_modules().items():
        if name == "base":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        registers = any(
            isinstance(node, ast.ClassDef)
            and any(
                isinstance(d, ast.Call) and getattr(d.func, "id", "") == detector.__name__
                for d in node.decorator_list
            )
            for node in tree.body
        )
        if not registers:
            helpers.append(name)
    assert helpers == []


def test_no_private_name_crosses_a_module_of_lint() -> None:
    """What one module of static/ takes from another is public (no ``_name`` imports)."""
    static = RULES.parent
    private = sorted(
        f"{path.relative_to(static)}: {node.module}.{alias.name}"
        for path in static.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ImportFrom)
        and (node.level > 0 or (node.module or "").startswith("torchdoctor"))
        for alias in node.names
        if alias.name.startswith("_") and not alias.name.startswith("__")
    )
    assert private == []


def test_the_check_sees_an_import_between_rules(tmp_path: Path) -> None:
    """The parser above catches each spelling of an import of a sibling rule."""
    source = tmp_path / "probe.py"
    source.write_text(
        "from torchdoctor.static.rules.loss import LossKind\n"
        "from torchdoctor.static.rules import distributed\n"
        "from .resume import item_assignments\n"
        "import torchdoctor.static.rules.model_outputs\n"
        "from torchdoctor.static.rules.base import LintRule\n"
        "from torchdoctor.static.analysis.losses import loss_calls\n",
        encoding="utf-8",
    )
    assert _imported(source) - ALLOWED == {
        f"{PACKAGE}.loss",
        f"{PACKAGE}.distributed",
        f"{PACKAGE}.resume",
        f"{PACKAGE}.model_outputs",
    }
