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
        if "unknown encoding" in str(error) or "encoding problem" in str(error):
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
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SyntaxWarning about escapes is not ours to show
            tree = ast.parse(text, filename=path, type_comments=False)
    except SyntaxError as error:
        return _syntax_error(path, text, error)
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
    # A file that never mentions torch (a parser's grammar fixtures, a Python 2 helper
    # script): nothing PyTorch-specific is lost, and any Python linter reports it.
    torchless = "torch" not in text
    return finding(
        UNPARSABLE,
        f"{path}:{line} is not valid Python: {what}; no other rule could check this file"
        + ("; its shebang asks for Python 2, so it is run as a Python 2 program" if python2 else "")
        + ("; it does not use torch" if torchless and not python2 else ""),
        Location(path=path, line=line, column=min(column, len(snippet or "")), snippet=snippet),
        Depth.LINT,
        fix_hint="Fix the syntax error (run `python -m py_compile` on the file to see it as "
        "Python does).",
        evidence={"error": type(error).__name__, "detail": what},
        severity=Severity.INFO if python2 or torchless else None,
    )


_PYTHON2_SHEBANG = re.compile(r"#!.*\bpython2(\.\d+)?\s*$")


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
