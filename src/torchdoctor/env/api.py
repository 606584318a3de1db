"""``torchdoctor env`` as a Python API: the facts, and the findings they imply."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable
from datetime import datetime, timezone
from typing import Any, cast

from torchdoctor.__about__ import __version__
from torchdoctor._kernel import Reporter, run_detector
from torchdoctor.env.facts import EnvFacts, facts
from torchdoctor.findings import Depth, Finding, Location, Report
from torchdoctor.rules.detectors import registered_detectors
from torchdoctor.rules.selection import Selection

__all__ = ["diagnose", "facts_to_dict"]


def diagnose(
    env: EnvFacts | None = None,
    *,
    select: Iterable[str] | None = None,
    ignore: Iterable[str] | None = None,
) -> Report:
    """Report the environment's facts and the settings that hurt training.

    Args:
        env: facts to judge; by default :func:`~torchdoctor.env.facts` of this process.
            Call it inside the training script to judge the script's own torch settings.
        select: rule codes or prefixes to report; default all.
        ignore: rule codes or prefixes not to report; the longest match wins.
    """
    env = env if env is not None else facts()
    report = Report(
        tool_version=__version__,
        command="env",
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )
    report.facts["environment"] = facts_to_dict(env)
    report.extend(_run_detectors(env, Selection.from_options(select, ignore)))
    return report


def facts_to_dict(env: EnvFacts) -> dict[str, Any]:
    """JSON-ready form of the facts: pairs become objects, devices a list of objects."""
    data = dataclasses.asdict(env)
    data["variables"] = dict(env.variables)
    data["packages"] = dict(env.packages)
    data["devices"] = [dataclasses.asdict(device) for device in env.devices]
    return data


def _run_detectors(env: EnvFacts, selection: Selection) -> list[Finding]:
    found: list[Finding] = []
    for info in registered_detectors(Depth.ENV):
        function = cast(Callable[[Any, Reporter], None], info.target)
        found.extend(
            run_detector(
                f"env detector {info.name}",
                info.codes,
                functools.partial(function, env),
                Depth.ENV,
                Location(object="environment"),
                selection,
            )
        )
    return found
