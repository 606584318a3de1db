"""Findings in test code are information: the policy, in one place.

A rule's severity speaks of a training program: an error says the program computes
something wrong, a warning that a maintainer would change it. Test code is not a training
program. A smoke test that runs ten steps without ``zero_grad()``, a toy discriminator
with ``sigmoid`` then ``BCELoss`` that checks one backward pass, a test that builds the
very pattern it tests: nobody reads their numbers as results, and their maintainers do
not change them. So, once the rules have run on a file that is test code, each warning
and error is lowered to info; its message says so and why, ``evidence["lowered_from"]``
holds the severity it had and ``evidence["test_code"]`` the reason.

**Test code** (a path is read from its project's folder down, that folder's own name
included, never above it: the folder is the configuration's, else the folder given to
``lint``, else the current folder. So ``lint ~/src/proj/tests`` reads
``tests/test_x.py``, and a checkout under ``~/tests/proj`` is not all tests):

- a file inside a folder named ``tests``, ``test`` or ``testing``;
- ``conftest.py``;
- ``test_*.py`` or ``*_test.py`` that defines a test (a top-level ``test_*`` function or
  a ``Test*`` class) or imports pytest;
- any other module that imports pytest or defines a ``TestCase`` subclass (``unittest``,
  ``torch.testing``, ``absltest``).

**Not test code**: a script named ``test.py``, ``eval.py``, or ``test_net.py`` with no test
in it. These are a project's evaluation entry points, where a wrong metric is a real bug,
so they keep full severity. ``from unittest import mock`` or a ``train_test_split`` helper
makes nothing test code either.

**Kept at full severity in test code**: TD405, workers of a ``DataLoader`` started from a
module without a ``__main__`` guard. It is the one claim that a test's own runs on a Linux
CI never show, and that stops the program from running at all elsewhere: with ``spawn``
(macOS, Windows) or ``forkserver`` (Linux from Python 3.14) the test crashes or hangs.
Every other claim is about what the code computes or how fast, or is a crash every run
of the test shows at once. TD001 and TD002 are torchdoctor's own statuses (it failed, it
could not read the file), not claims about the code, and are never lowered.

Turn it off with ``test-code-as-info = false`` in ``[tool.torchdoctor]`` or
``torchdoctor lint --no-test-code-as-info``.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path

from torchdoctor.findings import Finding, Severity
from torchdoctor.static.analysis.paths import TEST_FOLDERS

__all__ = [
    "KEPT_IN_TESTS",
    "lowered_in_tests",
    "relative_paths",
    "path_for_tests",
    "why_test_code",
]

# Codes whose severity test code does not lower (see the module docstring for why).
KEPT_IN_TESTS: frozenset[str] = frozenset({"TD001", "TD002", "TD405"})


def path_for_tests(path: str, bases: Sequence[Path]) -> str:
    """``path`` as test code is recognised by: from the first of ``bases`` (the project
    root, then the folders given to ``lint``, then the current folder) that holds it,
    that base's own name included, else its name alone. The folders above a project say
    nothing about it."""
    absolute = Path(os.path.abspath(path))
    for base in bases:
        if absolute == base or base in absolute.parents:  # the base holds it
            return absolute.relative_to(base.parent).as_posix()
    return absolute.name


def relative_paths(paths: Sequence[str]) -> list[str]:
    """Paths from the deepest folder holding them all, its name included (files linted
    from memory: their common folder stands for the project's, see :func:`path_for_tests`)."""
    if not paths:
        return []
    try:
        absolute = [os.path.abspath(p) for p in paths]
        common = Path(os.path.commonpath([os.path.dirname(p) for p in absolute]))
    except ValueError:  # different drives: the paths as given
        return [Path(p).as_posix() for p in paths]
    return [path_for_tests(p, [common]) for p in absolute]


def why_test_code(relative: str, tree: ast.Module, source: str) -> str | None:
    """Why the file at ``relative`` (see :func:`path_for_tests`) is test code, or ``None``."""
    *folders, name = relative.replace("\\", "/").split("/")
    for folder in folders:
        if folder in TEST_FOLDERS:
            return f"in a `{folder}/` folder"
    if name == "conftest.py":
        return "a pytest `conftest.py`"
    if "pytest" in source and _imports_pytest(tree):
        return "it imports pytest"
    if "TestCase" in source and any(_is_test_case(node) for node in tree.body):
        return "it defines a `TestCase`"
    named = name.startswith("test_") or name.endswith("_test.py")
    maybe_tests = "def test_" in source or "class Test" in source
    if named and maybe_tests and any(_is_test(node) for node in tree.body):
        return f"`{name}` defines tests"
    return None


def _top_level(tree: ast.Module) -> Iterable[ast.stmt]:
    """Module-level statements, with those of top-level ``try`` and ``if`` blocks (an
    optional import: ``try: import pytest``)."""
    for node in tree.body:
        yield node
        if isinstance(node, ast.Try):
            yield from node.body
        elif isinstance(node, ast.If):
            yield from node.body
            yield from node.orelse


def _imports_pytest(tree: ast.Module) -> bool:
    for node in _top_level(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names = [node.module or ""]
        else:
            continue
        if any(name.split(".")[0] == "pytest" for name in names):
            return True
    return False


def _is_test_case(node: ast.stmt) -> bool:
    return isinstance(node, ast.ClassDef) and any(
        _dotted_tail(base).endswith("TestCase") for base in node.bases
    )


def _is_test(node: ast.stmt) -> bool:
    """A test pytest would collect: ``def test_x`` or a ``Test*`` class with one."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return node.name.startswith("test_")
    if isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
        return _is_test_case(node) or any(
            isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
            and item.name.startswith("test")
            for item in node.body
        )
    return False


def _dotted_tail(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def lowered_in_tests(findings: list[Finding], reason: str) -> list[Finding]:
    """The findings of a test-code file, warnings and errors lowered to info (except
    :data:`KEPT_IN_TESTS`), each saying it was and why."""
    out = []
    for finding in findings:
        if finding.severity is Severity.INFO or finding.code in KEPT_IN_TESTS:
            out.append(finding)
            continue
        was = finding.severity.value
        out.append(
            replace(
                finding,
                severity=Severity.INFO,
                message=f"{finding.message} [info in test code ({reason}); {was} elsewhere]",
                evidence={**finding.evidence, "lowered_from": was, "test_code": reason},
            )
        )
    return out
