"""One file's text: lines, node positions as locations, and text edits at those positions.

:class:`SourceText` is the bottom layer of :class:`~torchdoctor.static.context.FileContext`:
it knows nothing of names or types, only where a node is and what text it covers. ``ast``
columns count UTF-8 bytes; everything here speaks characters, as editors and reports do.
"""

from __future__ import annotations

import ast
import re

from torchdoctor.findings import Edit, Location

__all__ = ["SourceText", "split_lines"]

# Lines with their ends, split the way ``ast`` counts lines (not on form feeds).
_SOURCE_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+")
# What ``str.splitlines`` ends a line at besides \r and \n; ``ast`` does not.
_OTHER_LINE_ENDS = ("\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")


def split_lines(source: str, keepends: bool = False) -> list[str]:
    """The lines of ``source`` as ``ast`` numbers them (``\r\n``, ``\r`` or ``\n`` end a
    line; a form feed does not). ``str.splitlines`` when no other line end occurs: it is
    several times faster than the pattern."""
    if source.isascii():
        others: tuple[str, ...] = _OTHER_LINE_ENDS[:5]
    else:
        others = _OTHER_LINE_ENDS
    if not any(end in source for end in others):
        return source.splitlines(keepends)
    found: list[str] = _SOURCE_LINE.findall(source)
    return found if keepends else [line.rstrip("\r\n") for line in found]


class SourceText:
    """The text of one parsed file and the places in it.

    Attributes:
        path: the path as given by the user (used in every location).
        source: the decoded text.
        lines: the text split into lines (without line ends).
        tree: the parsed module.
    """

    def __init__(self, path: str, source: str, tree: ast.Module) -> None:
        self.path = path
        self.source = source
        self.tree = tree
        self._lines: list[str] | None = None
        self._source_lines: list[str] | None = None

    @property
    def lines(self) -> list[str]:
        """The text split into lines (without line ends), split when first asked: most
        files have no finding and never need it."""
        lines = self._lines
        if lines is None:
            lines = self._lines = split_lines(self.source)
        return lines

    def line_text(self, line: int) -> str:
        """The text of a 1-based line, ``""`` past the end."""
        return self.lines[line - 1] if 0 < line <= len(self.lines) else ""

    def column(self, line: int, byte_offset: int) -> int:
        """Convert an ``ast`` column (UTF-8 bytes) to characters."""
        text = self.line_text(line)
        if text.isascii():
            return byte_offset
        return len(text.encode("utf-8")[:byte_offset].decode("utf-8", errors="replace"))

    def location(self, node: ast.AST) -> Location:
        """The location of a node: path, line, column, end and the line's text."""
        line = getattr(node, "lineno", 1)
        end_line = getattr(node, "end_lineno", None)
        end_offset = getattr(node, "end_col_offset", None)
        return Location(
            path=self.path,
            line=line,
            column=self.column(line, getattr(node, "col_offset", 0)),
            end_line=end_line,
            end_column=None
            if end_line is None or end_offset is None
            else self.column(end_line, end_offset),
            snippet=self.line_text(line),
        )

    def segment(self, node: ast.AST) -> str:
        """The source text of a node (``""`` when it has no position).

        Same result as ``ast.get_source_segment``, which splits the whole file on every
        call (quadratic when rules ask often on large files); the split is done once here.
        """
        first: int | None = getattr(node, "lineno", None)
        last: int | None = getattr(node, "end_lineno", None)
        start: int | None = getattr(node, "col_offset", None)
        end: int | None = getattr(node, "end_col_offset", None)
        if first is None or last is None or start is None or end is None:
            return ""
        first, last = first - 1, last - 1
        lines = self._lines_with_ends()
        if not 0 <= first <= last < len(lines):
            return ""
        if first == last:
            line = lines[first]
            if line.isascii():  # columns count bytes, which are characters here
                return line[start:end]
            return line.encode()[start:end].decode(errors="replace")
        head = lines[first].encode()[start:].decode(errors="replace")
        tail = lines[last].encode()[:end].decode(errors="replace")
        return "".join([head, *lines[first + 1 : last], tail])

    def may_contain(self, node: ast.AST, text: str) -> bool:
        """``False`` when :meth:`segment` of ``node`` certainly does not contain ``text``
        (a string without line ends): none of the node's lines does. Cheaper than the
        segment itself, for a pre-check."""
        first = getattr(node, "lineno", None)
        last = getattr(node, "end_lineno", None)
        if first is None or last is None:
            return True
        lines = self._lines_with_ends()
        return any(text in line for line in lines[max(first - 1, 0) : last])

    def _lines_with_ends(self) -> list[str]:
        lines = self._source_lines
        if lines is None:
            lines = self._source_lines = split_lines(self.source, keepends=True)
        return lines

    def replace(self, node: ast.AST, text: str) -> Edit:
        """An edit that replaces the node's text with ``text``."""
        loc = self.location(node)
        return Edit(
            loc.line or 1,
            loc.column or 0,
            loc.end_line or loc.line or 1,
            loc.end_column if loc.end_column is not None else loc.column or 0,
            text,
        )

    def insert_before_statement(self, statement: ast.stmt, text: str) -> Edit:
        """An edit that inserts ``text`` as a new line above ``statement``, same indent."""
        line = statement.lineno
        column = self.column(line, statement.col_offset)
        indent = self.line_text(line)[:column]
        return Edit(line, column, line, column, f"{text}\n{indent}")

    def delete_statement(self, statement: ast.AST) -> Edit | None:
        """An edit that removes a statement (or an expression statement's call) and its
        whole lines, when it has them to itself; ``None`` otherwise."""
        first = getattr(statement, "lineno", 1)
        last = getattr(statement, "end_lineno", None) or first
        start_col = self.column(first, getattr(statement, "col_offset", 0))
        end_col = self.column(last, getattr(statement, "end_col_offset", None) or 0)
        if self.line_text(first)[:start_col].strip():
            return None
        rest = self.line_text(last)[end_col:].strip()
        if rest and not rest.startswith("#"):
            return None
        return (
            Edit(first, 0, last + 1, 0, "")
            if last < len(self.lines)
            else Edit(first, 0, last, len(self.line_text(last)), "")
        )
