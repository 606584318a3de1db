"""``torchdoctor check TARGET``: find the user's factory, call it, check what it returns.

``TARGET`` is ``pkg.module:factory`` or ``path/to/file.py:factory``; without
``:factory`` the function ``make`` is used. What a factory may return is documented in
:mod:`torchdoctor.preflight` and normalised by :meth:`CheckTarget.from_result`.

:func:`load_factory` is the one importer of user factories; it lives in
:mod:`torchdoctor._usercode` (``torchdoctor ckpt --model`` uses it from there too, and
words its :class:`TargetNotFound` errors its own way) and is re-exported here. Nothing
here imports torch.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from torchdoctor._usercode import DEFAULT_FACTORY, TargetNotFound, call_user, load_factory
from torchdoctor.errors import UsageError
from torchdoctor.findings import Report

__all__ = [
    "DEFAULT_FACTORY",
    "CheckTarget",
    "TargetNotFound",
    "check_factory",
    "load_factory",
    "summary_factory",
]

_KEYS = ("model", "data", "loss_fn", "optimizer", "device", "step")
_REQUIRED = ("model", "data")


@dataclass(frozen=True, slots=True)
class CheckTarget:
    """The objects ``check`` takes, as a factory returned them."""

    model: Any
    data: Any
    loss_fn: Any = None
    optimizer: Any = None
    device: Any = None
    step: Any = None

    @classmethod
    def from_result(cls, made: Any, origin: str = "the factory") -> CheckTarget:
        """Normalise a factory's return value: a 3- or 4-tuple, or a dict.

        Raises:
            UsageError: any other shape, naming what was returned.
        """
        if isinstance(made, dict):
            unknown = sorted(set(made) - set(_KEYS))
            missing = [key for key in _REQUIRED if key not in made]
            if unknown or missing:
                problems = [f"unknown keys {unknown}"] if unknown else []
                problems += [f"missing keys {missing}"] if missing else []
                raise UsageError(
                    f"{origin} returned a dict with {' and '.join(problems)}; expected keys "
                    "model, data and optionally loss_fn, optimizer, step, device"
                )
            return cls(**made)
        if isinstance(made, (tuple, list)) and len(made) in (3, 4):
            return cls(*made)
        raise UsageError(
            f"{origin} returned {_describe(made)}; expected (model, data, loss_fn), "
            "(model, data, loss_fn, optimizer) or a dict with keys model, data and "
            "optionally loss_fn, optimizer, step, device"
        )

    def check(
        self,
        *,
        select: Iterable[str] | None = None,
        ignore: Iterable[str] | None = None,
        device: Any = None,
        seed: int = 0,
        forecast: Any = None,
        timeout: float | None = 60.0,
    ) -> Report:
        """Run :func:`torchdoctor.preflight.check` on these objects."""
        from torchdoctor.preflight import check

        return check(
            self.model,
            self.data,
            self.loss_fn,
            self.optimizer,
            step=self.step,
            device=device if device is not None else self.device,
            select=select,
            ignore=ignore,
            seed=seed,
            forecast=forecast,
            timeout=timeout,
        )


def _describe(value: Any) -> str:
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)} items"
    return f"a {type(value).__name__}"


def check_factory(
    target: str,
    *,
    select: Iterable[str] | None = None,
    ignore: Iterable[str] | None = None,
    device: Any = None,
    seed: int = 0,
    forecast: Any = None,
    timeout: float | None = 60.0,
) -> Report:
    """Load ``target``'s factory, call it, and check what it returns (with ``forecast``,
    a :class:`~torchdoctor.preflight.forecast.ForecastOptions`, the memory forecast too;
    ``timeout``: wall-clock seconds per probe)."""
    factory, label = load_factory(target)
    made = call_user(f"the factory {label}", factory)
    report = CheckTarget.from_result(made, f"the factory {label}").check(
        select=select, ignore=ignore, device=device, seed=seed, forecast=forecast, timeout=timeout
    )
    report.facts["target"] = label
    return report


def summary_factory(target: str) -> Report:
    """``torchdoctor summary TARGET``: the model summary of what ``target``'s factory
    returns, as a report whose facts hold ``summary`` (no probe runs)."""
    from datetime import datetime, timezone

    from torchdoctor.__about__ import __version__
    from torchdoctor.preflight.context import CheckContext
    from torchdoctor.preflight.memory_facts import _probe_batch
    from torchdoctor.preflight.summary import summarise

    factory, label = load_factory(target)
    made = CheckTarget.from_result(
        call_user(f"the factory {label}", factory), f"the factory {label}"
    )
    report = Report(
        tool_version=__version__,
        command="summary",
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )
    ctx = CheckContext(made.model, made.data, made.loss_fn, made.optimizer, step=made.step)
    report.facts.update(summarise(made.model, _probe_batch(ctx)).to_facts())
    report.facts["target"] = label
    return report
