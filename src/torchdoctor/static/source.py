"""Turning bytes into a parsed module, or into one ``TD002`` finding saying why not.

Every way a file can fail to become an AST ends here as a finding with a place: a syntax
error (its line and column), bytes that are not text in the declared encoding, a binary
file, nesting too deep for the parser. Nothing here raises for bad input.
"""

from __future__ import annotations

import ast
import codecs
import io
import re
import sys
import tokenize
import warnings
from dataclasses import dataclass

from torchdoctor.findings import Depth, Finding, Location, Severity
from torchdoctor.rules.detectors import detector
from torchdoctor.rules.registry import finding
from torchdoctor.static.source_text import split_lines

__all__ = ["Parsed", "decode", "parse"]

UNPARSABLE = "TD002"


@dataclass(frozen=True, slots=True)
class Parsed:
    """A decoded, parsed file."""

    text: str
    tree: ast.Module
    encoding: str


def decode(data: bytes, path: str) -> tuple[str, str] | Finding:
    """``(text, encoding)`` of a file's bytes (PEP 263 cookie, BOM), or a TD002 finding."""
    if b"\x00" in data:
        return _unparsable(
            path,
            1,
            0,
            "the file looks binary (it contains NUL bytes), not Python source",
            "Exclude it from linting, or rename it so it does not end in `.py`.",
        )
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as error:
        if _shim_codec(data):
            encoding = "utf-8"  # `# -*- coding: future_fstrings -*-`: UTF-8 text underneath
        elif "unknown encoding" in str(error) or "encoding problem" in str(error):
            return _unparsable(
                path,
                1,
                0,
                f"the file declares an unknown encoding ({error})",
                "Fix the `# -*- coding: ... -*-` line, or remove it to use UTF-8.",
            )
        encoding = "utf-8"  # undeclared and not UTF-8: let the decoder say where
    try:
        text = data.decode(encoding)
    except (UnicodeDecodeError, LookupError) as error:
        line, column = _byte_position(data, getattr(error, "start", 0))
        bad = data[getattr(error, "start", 0) : getattr(error, "start", 0) + 1]
        return _unparsable(
            path,
            line,
            column,
            f"the file is not valid {encoding} text (byte 0x{bad.hex()} at line "
            f"{line}); Python cannot read it",
            f"Re-save the file as {encoding}, or declare its real encoding with "
            "a `# -*- coding: ... -*-` line.",
        )
    if encoding == "utf-8-sig" or text.startswith("\ufeff"):
        text = text.removeprefix("\ufeff")
        encoding = "utf-8-sig"
    return text, encoding


# A PEP 263 encoding cookie, on one of the first two lines.
_COOKIE = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")
# Codecs that packages register at start-up to rewrite UTF-8 source for older Pythons
# (future-fstrings, future-annotations): on the Pythons they target the text is plain
# Python, read as UTF-8, and Python runs it wherever the package is installed.
_SHIM_CODECS = frozenset({"future_fstrings", "future_annotations"})


def _shim_codec(data: bytes) -> bool:
    """Whether the file's cookie names a source-rewriting shim codec."""
    for line in data.splitlines()[:2]:
        cookie = _COOKIE.match(line)
        if cookie is not None:
            return cookie.group(1).decode("ascii").lower().replace("-", "_") in _SHIM_CODECS
    return False


@detector(UNPARSABLE, depth=Depth.LINT)
def parse(data: bytes | str, path: str) -> Parsed | Finding:
    """Decode and parse a file, or say in a TD002 finding why it cannot be.

    This is TD002's detector: the parser reports it, before (and instead of) any rule.
    """
    if isinstance(data, str):
        text, encoding = data.removeprefix("\ufeff"), "utf-8"
        if "\x00" in text:
            return _unparsable(
                path,
                1,
                0,
                "the source contains NUL characters, not Python",
                "Remove the NUL characters.",
            )
    else:
        decoded = decode(data, path)
        if isinstance(decoded, Finding):
            return decoded
        text, encoding = decoded
    try:
        tree = _parse_text(text, path)
    except SyntaxError as error:
        # A notebook exported as a script (Colab, Databricks, nbconvert) keeps its IPython
        # shell escapes and magics (`!pip install ...`, `%matplotlib inline`): the
        # notebook runs them, so the file is IPython source, not broken Python. The rules
        # read the rest; the text (and any fix) keeps the magic lines as written.
        parsed = _parse_without_magics(text, path, error)
        if isinstance(parsed, SyntaxError):
            return _syntax_error(path, text, parsed)
        tree = parsed
    except (RecursionError, MemoryError):
        return _unparsable(
            path,
            1,
            0,
            "the file is nested too deeply for Python's parser (Python itself cannot compile it)",
            "Flatten the deepest expression or block.",
        )
    except ValueError as error:  # e.g. "source code string cannot contain null bytes"
        return _unparsable(
            path,
            1,
            0,
            f"the source cannot be parsed: {error}",
            "Fix the file so that Python can compile it.",
        )
    return Parsed(text, tree, encoding)


def _parse_text(text: str, path: str) -> ast.Module:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SyntaxWarning about escapes is not ours to show
        return ast.parse(text, filename=path, type_comments=False)


# An IPython line magic or shell escape where a statement starts, optionally assigned
# (`!nvidia-smi`, `%cd data`, `files = !ls`, `%%time`).
_MAGIC = re.compile(r"\s*(?:[A-Za-z_][\w.]*\s*=\s*)?[!%]")
# A cell magic whose body is not Python (`%%bash`, `%%writefile x.py`): the body runs to
# the next cell marker.
_FOREIGN_CELL = re.compile(
    r"\s*%%(?:bash|sh|script|writefile|file|html|javascript|js|latex|markdown|svg|perl|ruby)\b"
)
# Cell markers of exported notebooks: jupytext and VS Code (`# %%`), nbconvert
# (`# In[3]:`), Databricks (`# COMMAND ----------`).
_CELL_MARKER = re.compile(r"#\s*(?:%%|In\[[\s\d]*\]:?|COMMAND -{3,})")
# A file has at most a few dozen magics; the bound keeps a pathological one cheap.
_MAGIC_RETRIES = 200


def _parse_without_magics(text: str, path: str, error: SyntaxError) -> ast.Module | SyntaxError:
    """The tree of ``text`` read as IPython source: each syntax error that falls on a magic
    (and the lines it continues onto with a backslash, or the body of a cell magic that is
    not Python) is replaced by ``pass`` at its indentation, keeping every line where it
    was, and the text is parsed again. The first error that is not on a magic is returned
    (the file is broken Python either way)."""
    lines = split_lines(text, keepends=True)
    for _ in range(_MAGIC_RETRIES):
        index = (error.lineno or 0) - 1
        if not 0 <= index < len(lines) or not _MAGIC.match(lines[index]):
            return error
        end = index + 1
        if _FOREIGN_CELL.match(lines[index]):
            while end < len(lines) and not _CELL_MARKER.match(lines[end]):
                end += 1
        else:
            while end < len(lines) and lines[end - 1].rstrip("\r\n").endswith("\\"):
                end += 1
        indent = lines[index][: len(lines[index]) - len(lines[index].lstrip(" \t"))]
        for number in range(index, end):
            ending = lines[number][len(lines[number].rstrip("\r\n")) :]
            lines[number] = (indent + "pass" if number == index else "") + ending
        try:
            return _parse_text("".join(lines), path)
        except SyntaxError as again:
            error = again
        except (RecursionError, MemoryError, ValueError):
            return error
    return error


def _syntax_error(path: str, text: str, error: SyntaxError) -> Finding:
    line = error.lineno or 1
    column = max((error.offset or 1) - 1, 0)
    lines = split_lines(text)
    snippet = lines[line - 1] if 0 < line <= len(lines) else None
    what = error.msg or "invalid syntax"
    if snippet is not None and snippet.startswith(("<<<<<<<", "=======", ">>>>>>>")):
        what = "an unresolved merge-conflict marker"
    # `#!/usr/bin/env python2`: a Python 2 program kept on purpose (a data-preparation
    # helper its recipe runs with python2), not Python 3 code that fails: information.
    python2 = bool(lines) and _PYTHON2_SHEBANG.match(lines[0]) is not None
    # A print or exec statement, `except E, e:`: Python 2 code kept as it was written (an
    # archived research code base), not Python 3 code that broke.
    python3 = bool(lines) and _PYTHON3_SHEBANG.match(lines[0]) is not None
    python2_syntax = not python2 and not python3 and what.startswith(_PYTHON2_ERRORS)
    # `class Pipeline[T]:`, `type Alias = ...` (PEP 695): valid from Python 3.12, which
    # the Python running lint may predate; the file is not broken, lint cannot read it.
    newer = (
        sys.version_info < (3, 12)
        and snippet is not None
        and _TYPE_PARAMETERS.match(snippet) is not None
    )
    # A file that never mentions torch (a parser's grammar fixtures, a Python 2 helper
    # script): nothing PyTorch-specific is lost, and any Python linter reports it.
    torchless = "torch" not in text
    # A file holding only a path to another `.py` file: a symbolic link that a checkout
    # or an archive tool wrote as a plain file (git does so with `core.symlinks=false`,
    # Windows' default). The code it points to is linted where it lives.
    link = _LINK_STAND_IN.fullmatch(text.strip()) is not None
    return finding(
        UNPARSABLE,
        f"{path}:{line} is not valid Python: {what}; no other rule could check this file"
        + ("; its shebang asks for Python 2, so it is run as a Python 2 program" if python2 else "")
        + (
            "; it is written in Python 2, so it runs only as a Python 2 program"
            if python2_syntax
            else ""
        )
        + (
            f"; it uses type parameters (PEP 695), Python 3.12 syntax that this Python "
            f"({sys.version_info.major}.{sys.version_info.minor}) cannot parse: lint it with "
            "Python 3.12 or newer"
            if newer
            else ""
        )
        + ("; it does not use torch" if torchless and not python2 and not link else "")
        + (
            "; it holds only a path to another Python file: a symbolic link checked out as "
            "a plain file (git writes links so where it cannot make them, "
            "`core.symlinks=false`), so the code it points to is linted where it lives"
            if link
            else ""
        ),
        Location(path=path, line=line, column=min(column, len(snippet or "")), snippet=snippet),
        Depth.LINT,
        fix_hint="Fix the syntax error (run `python -m py_compile` on the file to see it as "
        "Python does).",
        evidence={"error": type(error).__name__, "detail": what},
        severity=Severity.INFO if python2 or python2_syntax or newer or torchless or link else None,
    )


_PYTHON2_SHEBANG = re.compile(r"#!.*\bpython2(\.\d+)?\s*$")
# The target of a symbolic link written out as text: one path, no spaces, to a `.py` file.
_LINK_STAND_IN = re.compile(r"[\w.\-]*(?:/[\w.\-]+)*/?[\w.\-]+\.py")
_PYTHON3_SHEBANG = re.compile(r"#!.*\bpython3(\.\d+)?\s*$")
# A generic class or function, or a type alias statement (PEP 695, Python 3.12).
_TYPE_PARAMETERS = re.compile(
    r"\s*(?:(?:async\s+)?def|class)\s+\w+\[|\s*type\s+\w+\s*(?:\[.*\])?\s*="
)
# What Python 3 says of a Python 2 print/exec statement and of `except E, e:`.
_PYTHON2_ERRORS = (
    "Missing parentheses in call to 'print'",
    "Missing parentheses in call to 'exec'",
    "multiple exception types must be parenthesized",
)


def _unparsable(path: str, line: int, column: int, what: str, hint: str) -> Finding:
    return finding(
        UNPARSABLE,
        f"{path} cannot be linted: {what}",
        Location(path=path, line=line, column=column),
        Depth.LINT,
        fix_hint=hint,
    )


def _byte_position(data: bytes, offset: int) -> tuple[int, int]:
    before = data[:offset]
    line = before.count(b"\n") + 1
    column = offset - (before.rfind(b"\n") + 1)
    return line, column


def encode(text: str, encoding: str) -> bytes:
    """Encode fixed text back the way the file was stored (BOM kept)."""
    if encoding == "utf-8-sig":
        return codecs.BOM_UTF8 + text.encode("utf-8")
    return text.encode(encoding)
