"""What FSDP1 (``FullyShardedDataParallel``) changes for the gradient detectors.

FSDP1 flattens a wrapped module's parameters into one ``FlatParameter`` per wrapped unit
and keeps only this rank's shard of it. The autograd graph ends at that flat parameter,
which ``model.parameters()`` does not list when ``use_orig_params=True``; and the
original parameters get a ``.grad`` only where their values lie in this rank's shard.
FSDP2 (``fully_shard``) keeps real, DTensor parameters and needs none of this.
"""

from __future__ import annotations

from typing import Any

__all__ = ["flat_parameters", "sharded_by_fsdp1", "shards_across_ranks"]


def _fsdp1_units(module: Any) -> list[Any]:
    return [m for m in module.modules() if type(m).__name__ == "FullyShardedDataParallel"]


def flat_parameters(module: Any) -> list[Any]:
    """The flat parameters of every FSDP1 unit inside ``module`` (none without FSDP1)."""
    found = []
    for unit in _fsdp1_units(module):
        flat = getattr(unit, "_flat_param", None)
        if flat is not None:
            found.append(flat)
    return found


def shards_across_ranks(unit: Any) -> bool:
    """Whether the FSDP1 module ``unit`` splits its parameters over two or more ranks."""
    group = int(getattr(unit, "world_size", 0) or 0)
    strategy = getattr(getattr(unit, "sharding_strategy", None), "name", "")
    return group >= 2 and strategy not in ("", "NO_SHARD")


def sharded_by_fsdp1(module: Any) -> bool:
    """Whether an FSDP1 unit inside ``module`` splits its parameters across ranks, so that
    a parameter's ``.grad`` on this rank may be ``None`` by design."""
    return any(shards_across_ranks(unit) for unit in _fsdp1_units(module))
