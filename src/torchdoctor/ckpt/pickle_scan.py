"""Read what a checkpoint's pickle would import, without running it.

A pickle names every class or function it needs with ``GLOBAL`` / ``STACK_GLOBAL``
opcodes. :mod:`pickletools` walks the opcodes as data, so nothing in the file is imported or
called here. The scan is what lets torchdoctor refuse an unsafe file *and* say which classes
it wanted, and notice that a file is a whole pickled ``nn.Module``.
"""

from __future__ import annotations

import _compat_pickle
import pickletools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO

__all__ = ["PickleScan", "scan_pickle", "scan_pickles"]

# The attribute names every nn.Module pickles in its __dict__; all three together mean
# the pickle holds a module object, not a state_dict.
_MODULE_STATE_KEYS = frozenset({"_parameters", "_buffers", "_modules"})
_STRING_OPS = frozenset(
    {
        "SHORT_BINUNICODE",
        "BINUNICODE",
        "BINUNICODE8",
        "UNICODE",
        "SHORT_BINSTRING",
        "BINSTRING",
        "STRING",
    }
)
_PUT_OPS = frozenset({"PUT", "BINPUT", "LONG_BINPUT"})
_GET_OPS = frozenset({"GET", "BINGET", "LONG_BINGET"})


@dataclass(frozen=True, slots=True)
class PickleScan:
    """What one or more pickle streams reference.

    Attributes:
        globals: ``module.qualname`` of every class or function referenced, in first-seen
            order, Python 2 names mapped to Python 3 ones (``__builtin__.set`` ->
            ``builtins.set``).
        holds_module: the stream pickles ``nn.Module`` objects (their ``_parameters``,
            ``_buffers`` and ``_modules`` attributes appear).
    """

    globals: tuple[str, ...]
    holds_module: bool


def scan_pickle(stream: IO[bytes]) -> PickleScan:
    """Scan one pickle from ``stream``, stopping at its ``STOP`` opcode."""
    return scan_pickles(stream, count=1)


def scan_pickles(stream: IO[bytes], count: int) -> PickleScan:
    """Scan ``count`` consecutive pickles (the legacy torch format writes several).

    Raises:
        ValueError: the bytes are not a valid pickle (a truncated or foreign file).
    """
    found: dict[str, None] = {}
    strings: set[str] = set()
    for _ in range(count):
        for name in _globals_of_one(stream, strings):
            found.setdefault(name, None)
    return PickleScan(tuple(found), strings >= _MODULE_STATE_KEYS)


def _globals_of_one(stream: IO[bytes], strings: set[str]) -> Iterator[str]:
    memo: dict[int, object] = {}
    recent: list[object] = []  # last values pushed, for STACK_GLOBAL's two operands
    try:
        for opcode, argument, _ in pickletools.genops(stream):
            name = opcode.name
            if name in _STRING_OPS:
                value = argument.decode("latin-1") if isinstance(argument, bytes) else argument
                strings.add(str(value))
                recent = [*recent[-1:], value]
            elif name == "GLOBAL":
                module, _, qualname = str(argument).partition(" ")
                yield _modern_name(module, qualname)
            elif name == "STACK_GLOBAL" and len(recent) == 2:
                yield _modern_name(str(recent[0]), str(recent[1]))
            elif name in _PUT_OPS and recent:
                memo[_index(argument)] = recent[-1]
            elif name == "MEMOIZE" and recent:
                memo[len(memo)] = recent[-1]
            elif name in _GET_OPS:
                recent = [*recent[-1:], memo.get(_index(argument))]
            elif name not in {"FRAME", "MEMOIZE", *_PUT_OPS}:
                recent = []
    except (ValueError, EOFError, IndexError, UnicodeDecodeError) as error:
        raise ValueError(f"not a valid pickle stream ({error})") from None


def _index(argument: object) -> int:
    return argument if isinstance(argument, int) else int(str(argument))


def _modern_name(module: str, qualname: str) -> str:
    mapped = _compat_pickle.NAME_MAPPING.get((module, qualname))
    if mapped is not None:
        module, qualname = mapped
    else:
        module = _compat_pickle.IMPORT_MAPPING.get(module, module)
    return f"{module}.{qualname}"
