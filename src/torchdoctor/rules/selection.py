"""Which rules are enabled: ``--select`` / ``--ignore`` by code or prefix, longest match wins."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["Selection"]


@dataclass(frozen=True, slots=True)
class Selection:
    """A select/ignore pair of code prefixes (``"TD2"``, ``"TD201"``, ``"TD"``).

    A code is enabled when the longest prefix matching it comes from ``select``. On a tie
    between select and ignore of the same length, ignore wins. With no ``select`` given,
    everything is selected (``"TD"``).
    """

    select: tuple[str, ...] = ("TD",)
    ignore: tuple[str, ...] = ()

    @classmethod
    def from_options(
        cls, select: Iterable[str] | None = None, ignore: Iterable[str] | None = None
    ) -> Selection:
        """Build from user input: comma-separated or repeated values, any case."""
        return cls(_normalise(select) or ("TD",), _normalise(ignore))

    def is_enabled(self, code: str) -> bool:
        """Whether findings with ``code`` are reported."""
        code = code.upper()
        best_select = max((len(p) for p in self.select if code.startswith(p)), default=-1)
        best_ignore = max((len(p) for p in self.ignore if code.startswith(p)), default=-1)
        return best_select >= 0 and best_select > best_ignore


def _normalise(values: Iterable[str] | None) -> tuple[str, ...]:
    if not values:
        return ()
    out: list[str] = []
    for value in values:
        out.extend(part.strip().upper() for part in value.split(",") if part.strip())
    return tuple(out)
