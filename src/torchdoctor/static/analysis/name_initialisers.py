"""Whether the program initialises a module attribute by name from the outside.

Training scripts often fill parameters created with uninitialised memory
(``self.r_emb = nn.Parameter(torch.Tensor(...))``) from a function applied to every
submodule: ``model.apply(weights_init)`` with ``if hasattr(m, "r_emb"): init_weight(m.r_emb)``
or ``m.r_emb.data.normal_(0, 0.02)``. The class never writes the attribute itself, but
the program does before any forward. Searched as text in the file and the files along its
folder line (see :mod:`related_files`), once per attribute name; an initialiser is also
looked for in the project's modules that import the file, wherever they sit (the init
helpers that dispatch on the class must import it).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from torchdoctor.static.analysis.related_files import (
    first_in_importing_files,
    first_in_related_files,
)
from torchdoctor.static.context import FileContext

__all__ = ["initialised_by_name", "read_by_name"]

_FILLS = rb"normal_|uniform_|zero_|zeros_|fill_|copy_|constant_|xavier_\w+|kaiming_\w+|orthogonal_"


def initialised_by_name(ctx: FileContext, attribute: str) -> bool:
    """Whether some code along the file's folder line, or in a module of the project
    that imports the file, fills ``<obj>.<attribute>`` of another object: an init
    function given it (``init_weight(m.attr)``, ``nn.init.normal_(m.attr)``, TorchSemiSeg's
    ``conv_init(m.weight_0)`` in ``utils/init_func.py``, which imports the class from a
    sibling folder) or a fill method on it (``m.attr.data.uniform_()``).
    ``self.<attribute>`` inside the class is the class's own business, not counted."""
    name = re.escape(attribute.encode())
    pattern = re.compile(
        rb"(?<!self)\." + name + rb"(?:\.data)?\.(?:" + _FILLS + rb")\("
        rb"|(?:init\w*|" + _FILLS + rb")\s*\([^()\n]*?(?<!self)\." + name + rb"\b"
    )
    search = _code_matching(attribute, pattern)
    question = f"initialised-by-name:{attribute}"
    return bool(
        first_in_related_files(ctx, question, search)
        or first_in_importing_files(ctx, question, search)
    )


def read_by_name(ctx: FileContext, attribute: str) -> bool:
    """Whether any code along the file's folder line names ``<obj>.<attribute>`` other
    than to assign it, or spells the name as a string (``getattr(m, "attr")``, a state
    dict key): SSLRec's ``self.ii_w = nn.Parameter(torch.Tensor(...))`` that no line
    ever reads holds memory nothing computes with."""
    name = re.escape(attribute.encode())
    pattern = re.compile(rb"\." + name + rb"\b(?!\s*=[^=])|['\"]" + name + rb"['\"]")
    search = _code_matching(attribute, pattern)
    if search(ctx.path, ctx.source.encode("utf-8", "replace")):
        return True  # the file itself, read from memory when it is not on disk
    return bool(first_in_related_files(ctx, f"read-by-name:{attribute}", search))


def _code_matching(
    attribute: str, pattern: re.Pattern[bytes]
) -> Callable[[str, bytes], bool | None]:
    """An answer for :func:`first_in_related_files`: ``True`` when a line of a file's code
    (its comments left out) matches ``pattern``; the attribute's name is looked for first,
    so most files are passed over whole."""

    def search(path: str, data: bytes) -> bool | None:
        if attribute.encode() not in data:
            return None
        for line in data.splitlines():
            if pattern.search(line.split(b"#", 1)[0]):
                return True
        return None

    return search
