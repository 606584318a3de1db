"""``torchdoctor env`` as a Python API: the facts, and the findings they imply."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timezone
from typing import Any

from torchdoctor.__about__ import __version__
from torchdoctor.env.facts import EnvFacts, facts
from torchdoctor.findings import Depth, Finding, Location, Report
from torchdoctor.rules.detectors import registered_detectors
from torchdoctor.rules.registry import finding

__all__ = ["diagnose", "facts_to_dict"]


def diagnose(env: EnvFacts | None = None) -> Report:
    """Report the environment's facts and the settings that hurt training.

    Args:
        env: facts to judge; by default :func:`~torchdoctor.env.facts` of this process.
            Call it inside the training script to judge the script's own torch settings.
    """
    env = env if env is not None else facts()
    report = Report(tool_version=__version__, command="env",
                    created=datetime.now(timezone.utc).isoformat(timespec="seconds"))
    report.facts["environment"] = facts_to_dict(env)
    report.extend(_run_detectors(env))
    return report


def facts_to_dict(env: EnvFacts) -> dict[str, Any]:
    """JSON-ready form of the facts: pairs become objects, devices a list of objects."""
    data = dataclasses.asdict(env)
    data["variables"] = dict(env.variables)
    data["packages"] = dict(env.packages)
    data["devices"] = [dataclasses.asdict(device) for device in env.devices]
    return data


def _run_detectors(env: EnvFacts) -> list[Finding]:
    found: list[Finding] = []
    for info in registered_detectors(Depth.ENV):
        try:
            found.extend(info.target(env))  # type: ignore[operator]
        except Exception as error:  # noqa: BLE001 - one broken detector must not hide the rest
            found.append(finding(
                "TD001", f"env detector {info.name} failed: {type(error).__name__}: {error}",
                Location(object="environment"), Depth.ENV,
                fix_hint="Report this bug; the other detectors' findings are complete."))
    return found
