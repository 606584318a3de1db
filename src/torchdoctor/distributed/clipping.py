"""TD814 at run depth: ``torch.nn.utils.clip_grad_norm_`` over a sharded FSDP1 model.

While a job runs with more than one rank, torch's ``clip_grad_norm_`` (and the old
``clip_grad_norm``) is wrapped. When the parameters it is given belong to a
``FullyShardedDataParallel`` (FSDP1) model whose strategy shards gradients over a group
of two or more ranks, the norm it returns is this rank's shard's: reported at the user's
line, with that local norm as evidence. Rank-local: the sharding is read from the model,
so no exchange between ranks is needed, and the finding of every rank merges into one.

Cheap when it does not apply: a job that never imported FSDP1 costs a dictionary lookup
per clip; parameters FSDP1 did not flatten (DDP, FSDP2's DTensors) cost one attribute
read each. The FSDP1 modules are looked up once (a scan of live objects) the first time
flattened parameters are clipped (again only for a new set of parameters).
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Callable
from types import GeneratorType
from typing import Any

from torchdoctor.distributed.tracking import Patches
from torchdoctor.findings import Depth, Location, Report
from torchdoctor.rules.detectors import detector
from torchdoctor.rules.registry import finding
from torchdoctor.runtime.detectors.base import MonitorView, RuntimeDetector
from torchdoctor.runtime.sharding import shards_across_ranks

__all__ = ["ClipNormFromLocalShard"]

_FSDP1_MODULE = "torch.distributed.fsdp.fully_sharded_data_parallel"
# torch's deprecated ``clip_grad_norm`` calls the module's ``clip_grad_norm_``, which is
# wrapped; wrapping the alias too would put its deprecation warning at our wrapper's line.
_CLIP_NAMES = ("clip_grad_norm_",)


@detector("TD814", depth=Depth.RUN)
class ClipNormFromLocalShard(RuntimeDetector):
    """Notes torch's norm clipping over the parameters of a sharded FSDP1 model."""

    def __init__(self) -> None:
        self._patches = Patches(alive=self.attached)
        self._error: BaseException | None = None
        self._sites: set[tuple[str, int]] = set()
        self._owners: dict[frozenset[int], weakref.ref[Any] | None] = {}

    def on_attach(self, monitor: MonitorView) -> None:
        super().on_attach(monitor)
        import torch

        self._torch = torch
        if not torch.distributed.is_available():
            return
        utils = torch.nn.utils
        module = getattr(utils, "clip_grad", None)
        for name in _CLIP_NAMES:
            original = getattr(utils, name, None)
            self._patches.wrap(utils, name, self._wrapper)
            if module is not None and getattr(module, name, None) is original:
                self._patches.wrap(module, name, self._wrapper)

    def _wrapper(self, original: Callable[..., Any]) -> Callable[..., Any]:
        patches = self._patches

        def clip_grad_norm_(*args: Any, **kwargs: Any) -> Any:
            if args:
                parameters, args = args[0], args[1:]
            elif "parameters" in kwargs:
                parameters = kwargs.pop("parameters")
            else:
                return original(*args, **kwargs)  # torch says what is missing
            if not patches.live() or self._torch.is_tensor(parameters):
                return original(parameters, *args, **kwargs)
            listed = list(parameters)  # a generator is read once: torch gets a fresh one
            given = (p for p in listed) if isinstance(parameters, GeneratorType) else listed
            norm = original(given, *args, **kwargs)
            try:
                self._clipped(listed, norm)
            except Exception as error:  # noqa: BLE001 - never break the user's call
                patches.active = False
                self._error = error
            return norm

        return clip_grad_norm_

    def _clipped(self, parameters: list[Any], norm: Any) -> None:
        fsdp = sys.modules.get(_FSDP1_MODULE)
        if fsdp is None:
            return  # FSDP1 never imported: no model of it exists
        flattened = {id(p) for p in parameters if getattr(p, "_fsdp_flattened", False)}
        if not flattened:
            return
        dist = self._torch.distributed
        if not dist.is_initialized() or dist.get_world_size() < 2:
            return
        model = self._sharded_owner(fsdp.FullyShardedDataParallel, flattened)
        if model is None:
            return
        site = self.monitor.user_site()
        key = (site.path, site.line) if site is not None else ("", 0)
        if key in self._sites:
            return
        self._sites.add(key)
        strategy = getattr(getattr(model, "sharding_strategy", None), "name", "?")
        group = int(getattr(model, "world_size", 0) or 0)
        where = (
            site.location(object="FullyShardedDataParallel")
            if site is not None
            else Location(object="FullyShardedDataParallel")
        )
        self.emit(
            finding(
                "TD814",
                "`torch.nn.utils.clip_grad_norm_` clips the parameters of a "
                f"FullyShardedDataParallel model sharded over {group} ranks ({strategy}): "
                "each rank computed the norm of its own shard and clips by its own factor, "
                "so the ranks clip differently and the returned norm is not the model's",
                where,
                Depth.RUN,
                evidence={
                    "local_norm": round(float(norm), 6),
                    "shard_group_size": group,
                    "sharding_strategy": strategy,
                },
                fix_hint="Call the root FSDP module's method on every rank: "
                "`model.clip_grad_norm_(max_norm)` (it all-reduces the shard norms).",
            )
        )

    def _sharded_owner(self, fsdp_class: type, flattened: set[int]) -> Any:
        """The FSDP1 module, sharded over two or more ranks, holding any of the clipped
        parameters; ``None`` when there is none. Decided once per parameter set (one scan
        of the live objects for FSDP1 modules)."""
        key = frozenset(flattened)
        if key in self._owners:
            known = self._owners[key]
            return None if known is None else known()
        import gc

        owner = None
        # type(), not isinstance(): isinstance reads `__class__`, which some objects'
        # attribute hooks answer with a deprecation warning.
        models: list[Any] = [o for o in gc.get_objects() if issubclass(type(o), fsdp_class)]
        for model in models:
            if shards_across_ranks(model) and any(id(p) in flattened for p in model.parameters()):
                owner = model
                break
        self._owners[key] = None if owner is None else weakref.ref(owner)
        return owner

    def on_finish(self, report: Report) -> None:
        self._patches.remove()
        if self._error is not None:
            raise self._error  # reported once as TD001 by the dispatcher
