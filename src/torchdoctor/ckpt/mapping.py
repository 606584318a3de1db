"""Propose how to rename a checkpoint's keys so they fit a model.

Keys that do not match are almost always off by a prefix: ``module.`` from DDP,
``_orig_mod.`` from ``torch.compile``, ``model.`` from a Lightning module, or a submodule
renamed in a refactor (``backbone.`` -> ``encoder.``). A rewrite replaces one leading
prefix by another. Candidates come from pairs of unmatched keys whose longest common dotted
suffix leaves different prefixes, and a pair only counts when both tensors have the same
shape; rewrites covering most keys are taken first, and a prefix that could go to two
places equally well is left alone rather than guessed.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["KeyMapping", "Rewrite", "propose_mapping"]

Shape = tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Rewrite:
    """Replace the leading ``old`` of a key by ``new`` (either may be empty).

    Attributes:
        old: prefix in the checkpoint, ending with ``.`` unless empty.
        new: prefix the model expects, ending with ``.`` unless empty.
        keys: how many keys this rewrite maps.
    """

    old: str
    new: str
    keys: int

    def __str__(self) -> str:
        if not self.new:
            return f"strip '{self.old}'"
        if not self.old:
            return f"add '{self.new}'"
        return f"'{self.old}' -> '{self.new}'"


@dataclass(frozen=True, slots=True)
class KeyMapping:
    """A proposed renaming of checkpoint keys.

    Attributes:
        rewrites: prefix rewrites, most keys first.
        renamed: checkpoint key -> model key, for every key a rewrite maps.
    """

    rewrites: tuple[Rewrite, ...] = ()
    renamed: Mapping[str, str] | None = None

    def apply(self, key: str) -> str:
        """The model key for a checkpoint key (unchanged when no rewrite maps it)."""
        return (self.renamed or {}).get(key, key)

    def __bool__(self) -> bool:
        return bool(self.rewrites)

    def describe(self) -> str:
        """``strip 'module.' (12 keys); 'backbone.' -> 'encoder.' (8 keys)``."""
        return "; ".join(f"{r} ({r.keys} key{'s' if r.keys != 1 else ''})" for r in self.rewrites)


def propose_mapping(checkpoint: Mapping[str, Shape], model: Mapping[str, Shape]) -> KeyMapping:
    """Find prefix rewrites that map unmatched checkpoint keys onto unmatched model keys.

    Args:
        checkpoint: checkpoint key -> shape.
        model: model state_dict key -> shape.
    """
    loose = {k: s for k, s in checkpoint.items() if k not in model}
    wanted = {k: s for k, s in model.items() if k not in checkpoint}
    renamed: dict[str, str] = {}
    rewrites: list[Rewrite] = []
    settled_prefixes: set[str] = set()
    for old, new in _ranked_candidates(loose, wanted):
        if old in settled_prefixes:
            continue
        pairs = _pairs_for(old, new, loose, wanted, renamed)
        if pairs:
            settled_prefixes.add(old)
            renamed.update(pairs)
            rewrites.append(Rewrite(old, new, len(pairs)))
    return KeyMapping(tuple(rewrites), renamed)


def _ranked_candidates(
    loose: Mapping[str, Shape], wanted: Mapping[str, Shape]
) -> list[tuple[str, str]]:
    by_suffix: dict[tuple[str, Shape], list[str]] = defaultdict(list)
    for key, shape in wanted.items():
        for suffix in _suffixes(key):
            by_suffix[(suffix, shape)].append(key)
    support: Counter[tuple[str, str]] = Counter()
    for key, shape in loose.items():
        for suffix in _suffixes(key):  # longest first: the most specific evidence
            hits = by_suffix.get((suffix, shape))
            if hits:
                old = key[: len(key) - len(suffix)]
                for target in hits:
                    support[(old, target[: len(target) - len(suffix)])] += 1
                break
    ranked = sorted(
        support.items(), key=lambda item: (-item[1], len(item[0][0]) + len(item[0][1]), item[0])
    )
    return _drop_ambiguous(ranked)


def _drop_ambiguous(ranked: list[tuple[tuple[str, str], int]]) -> list[tuple[str, str]]:
    # Two destinations with the same support for one prefix: a guess either way.
    best: dict[str, int] = {}
    tied: set[str] = set()
    for (old, _new), count in ranked:
        if old not in best:
            best[old] = count
        elif count == best[old]:
            tied.add(old)
    return [(old, new) for (old, new), _ in ranked if old not in tied]


def _pairs_for(
    old: str,
    new: str,
    loose: Mapping[str, Shape],
    wanted: Mapping[str, Shape],
    renamed: Mapping[str, str],
) -> dict[str, str]:
    taken = set(renamed.values())
    pairs: dict[str, str] = {}
    for key, shape in loose.items():
        if key in renamed or not key.startswith(old):
            continue
        target = new + key[len(old) :]
        if wanted.get(target) == shape and target not in taken:
            pairs[key] = target
            taken.add(target)
    return pairs


def _suffixes(key: str) -> list[str]:
    """Dotted suffixes, longest first: ``a.b.c`` -> ``a.b.c``, ``b.c``, ``c``."""
    parts = key.split(".")
    return [".".join(parts[i:]) for i in range(len(parts))]
