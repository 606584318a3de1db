"""Which rules are enabled: ``--select`` / ``--ignore`` by code or prefix, longest match wins."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["Selection", "check_selectors"]

# Users' own rules: codes under this prefix are declared later, when their detectors are
# handed to watch() or check(), so any selector inside it is accepted.
_CUSTOM_PREFIX = "TDX"


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
        """Build from user input: comma-separated or repeated values, any case.

        Raises:
            UsageError: a value is no code and no prefix of one (``TD2O1``): selecting it
                would silently check nothing. The message names the closest valid codes.
        """
        chosen, skipped = _normalise(select), _normalise(ignore)
        check_selectors(chosen, "select")
        check_selectors(skipped, "ignore")
        return cls(chosen or ("TD",), skipped)

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


def check_selectors(values: Iterable[str], option: str, where: str = "") -> None:
    """Raise :class:`~torchdoctor.errors.UsageError` for a value that matches no rule.

    A value is valid when it is a code or a prefix of one (``TD``, ``TD2``, ``TD201``),
    or lies in the custom-rule namespace (``TDX...``). ``where`` names the source
    (a config file) in the message.
    """
    from torchdoctor.rules.registry import _CUSTOM, RULES

    codes = [*RULES, *_CUSTOM]
    for value in values:
        text = value.strip().upper()
        if (
            not text
            or any(code.startswith(text) for code in codes)
            or (text.startswith(_CUSTOM_PREFIX) or _CUSTOM_PREFIX.startswith(text))
        ):
            continue
        import difflib

        prefixes = sorted({code[:i] for code in codes for i in (3, 4)})
        close = difflib.get_close_matches(text, [*codes, *prefixes], n=3, cutoff=0.6)
        lookalike = text.replace("O", "0").replace("I", "1").replace("L", "1")
        if any(code.startswith(lookalike) for code in codes):  # TD2O1 -> TD201
            close = [lookalike, *(c for c in close if c != lookalike)][:3]
        hint = (
            f"; did you mean {', '.join(close)}?"
            if close
            else "; `torchdoctor rules` lists the codes"
        )
        source = f"{where}: " if where else ""
        from torchdoctor.errors import UsageError

        raise UsageError(f"{source}{option} {value!r} matches no rule code{hint}")
