"""Updates that the parameters' dtype cannot represent (TD621).

Two ways a float16 or bfloat16 parameter held by the optimizer itself (no float32 master
copy, as ``torch.autocast`` plus float32 weights or a mixed-precision optimizer keeps)
loses what the optimizer computed:

* **The step rounds away.** A weight of size ``w`` moves only by more than half its ulp:
  ``w * 2**-9`` in bfloat16 (8 mantissa bits), ``w * 2**-12`` in float16. Adam's update is
  about the learning rate, so at ``lr=1e-4`` a bfloat16 weight of 0.05 never moves. On
  sampled steps the detector compares, on a slice of each low-precision parameter, how
  many elements the step changed with how many had a non-zero gradient.
* **``eps`` rounds to zero.** Adam-style optimizers add ``eps`` to the root of the second
  moment in the parameter's dtype: float16 cannot hold 1e-8 (its smallest value is about
  6e-8), so a coordinate whose second moment is zero divides by zero. Read once per
  optimizer, from its parameter groups.

Policy for correct programs that look alike: float32 parameters are never judged (they are
the master copy); a step that changes few elements because few had a gradient (sparse
embeddings) is measured against the elements with a gradient; an optimizer that keeps its
own high-precision copy or rounds stochastically changes the elements, and is quiet.
"""

from __future__ import annotations

import functools
import statistics
from operator import attrgetter
from typing import Any

from torchdoctor.findings import Depth, Location, Report
from torchdoctor.rules.detectors import detector
from torchdoctor.rules.registry import finding
from torchdoctor.runtime.detectors.base import OptimizerInfo, RuntimeDetector, StepEvent
from torchdoctor.runtime.detectors.places import describe_params

__all__ = ["UnrepresentableUpdates"]

_SLICE = 4096  # elements compared per parameter
_LOST = 0.25  # changed / had a gradient, at the median sampled step: most updates lost
_MIN_SAMPLES = 3


@detector("TD621", depth=Depth.RUN)
class UnrepresentableUpdates(RuntimeDetector):
    """Low-precision parameters whose updates are rounded away, or whose eps underflows."""

    sampled_hooks = frozenset({"on_step_begin", "on_step_end"})

    def __init__(self) -> None:
        self._before: dict[int, tuple[list[Any], list[Any], Any]] = {}
        self._ratios: dict[int, list[float]] = {}  # optimizer -> changed/graded per sample
        self._params: dict[int, tuple[OptimizerInfo, list[Any]]] = {}

    def on_optimizer(self, optimizer: OptimizerInfo) -> None:
        torch = _torch()
        for index, group in enumerate(optimizer.optimizer.param_groups):
            eps = group.get("eps")
            if not isinstance(eps, float) or eps <= 0:
                continue
            low = [p for p in group["params"] if p.dtype in (torch.float16, torch.bfloat16)]
            if low and torch.tensor(eps, dtype=low[0].dtype).item() == 0.0:
                self._eps_finding(optimizer, index, eps, low)

    def on_step_begin(self, event: StepEvent) -> None:
        torch = _torch()
        params = event.optimizer.params
        dtypes = set(map(_dtype, params))  # read in C: most runs hold no half precision
        if torch.float16 not in dtypes and torch.bfloat16 not in dtypes:
            return
        low = [
            p
            for p in params
            if p.dtype in (torch.float16, torch.bfloat16)
            and p.grad is not None
            and not p.is_sparse
            and not p.grad.is_sparse
        ]
        if not low:
            return
        with torch.no_grad():
            slices = [_slice(p).clone() for p in low]
            graded = torch.stack([(_slice(p.grad) != 0).sum() for p in low]).sum()
        self._before[id(event.optimizer.optimizer)] = (low, slices, graded)
        self._params.setdefault(id(event.optimizer.optimizer), (event.optimizer, low))

    def on_step_end(self, event: StepEvent) -> None:
        before = self._before.pop(id(event.optimizer.optimizer), None)
        if before is None:
            return
        params, slices, graded = before
        torch = _torch()
        with torch.no_grad():
            changed = torch.stack(
                [(_slice(p) != old).sum() for p, old in zip(params, slices, strict=True)]
            ).sum()
            vector = torch.stack([changed.float(), graded.float().to(changed.device)])
        key = id(event.optimizer.optimizer)
        self.monitor.defer(vector, functools.partial(self._count, key))

    def _count(self, key: int, values: list[float]) -> None:
        changed, graded = values
        if graded > 0:
            self._ratios.setdefault(key, []).append(changed / graded)

    def on_finish(self, report: Report) -> None:
        for key, ratios in self._ratios.items():
            if len(ratios) < _MIN_SAMPLES or statistics.median(ratios) >= _LOST:
                continue
            info, params = self._params[key]
            text, names = describe_params(self.monitor, params)
            lrs = ", ".join(f"{g.get('lr')}" for g in info.optimizer.param_groups)
            share = statistics.median(ratios)
            self.emit(
                finding(
                    "TD621",
                    f"{info.label} (lr {lrs}) updates {text} in {params[0].dtype} with no "
                    f"float32 copy: at the median sampled step only {share:.0%} of the "
                    "elements that had a gradient changed; the rest of each update was "
                    "smaller than half the dtype's spacing at the weight's size and was "
                    "rounded away, so the model learns far slower than the loss suggests, "
                    "or not at all",
                    self._place(info, names[0]),
                    Depth.RUN,
                    fix_hint="Keep the parameters in float32 and compute in low precision "
                    "with `torch.autocast`, or use an optimizer that keeps a float32 "
                    "master copy (or rounds stochastically).",
                    evidence={
                        "optimizer": info.label,
                        "changed_share": share,
                        "samples": len(ratios),
                        "dtype": str(params[0].dtype),
                    },
                )
            )

    def _eps_finding(self, info: OptimizerInfo, group: int, eps: float, params: list[Any]) -> None:
        text, names = describe_params(self.monitor, params)
        self.emit(
            finding(
                "TD621",
                f"{info.label} (parameter group {group}) has `eps={eps:g}`, which "
                f"{params[0].dtype} cannot hold (it rounds to 0): {text} are updated in "
                f"{params[0].dtype}, so a coordinate whose second moment is zero divides "
                "by zero and its update becomes NaN or Inf",
                self._place(info, names[0]),
                Depth.RUN,
                fix_hint="Keep the parameters in float32 (compute in half precision with "
                "`torch.autocast`), or raise `eps` to a value the dtype holds (1e-4 for "
                "float16).",
                evidence={"optimizer": info.label, "eps": eps, "dtype": str(params[0].dtype)},
            )
        )

    def _place(self, info: OptimizerInfo, name: str) -> Location:
        site = self.monitor.optimizer_site(info.optimizer)
        return site.location(object=name) if site is not None else Location(object=name)


_dtype = attrgetter("dtype")


def _slice(tensor: Any) -> Any:
    return tensor.detach().reshape(-1)[:_SLICE]


def _torch() -> Any:
    import torch

    return torch
