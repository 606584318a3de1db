"""Test doubles for runtime detectors: a monitor that records findings, small helpers.

Detectors that only read host numbers (loss curves, timings, memory points) are tested by
feeding events to them through :class:`FakeMonitor`, without torch or a training loop.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torchdoctor._kernel import Reporter
from torchdoctor.findings import Depth, Finding, Location, Report
from torchdoctor.rules.detectors import registered_detectors
from torchdoctor.runtime.detectors.base import CallSite, RuntimeDetector

SITE = CallSite(str(Path(__file__).resolve()), 10, "train", True)


@dataclass
class FakeOptions:
    localise_non_finite: bool = False
    max_steps: int | None = None


@dataclass
class FakeMonitor:
    """Implements the parts of ``MonitorView`` that host-number detectors use."""

    global_step: int = 0
    models: Sequence[Any] = ()
    optimizers: Sequence[Any] = ()
    user_roots: Sequence[Path] = ()
    script: Path | None = None
    options: FakeOptions = field(default_factory=FakeOptions)
    site: CallSite | None = SITE
    findings: dict[Any, Finding] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)

    def module_path(self, module: Any) -> str | None:
        return None

    def param_name(self, param: Any) -> str | None:
        return None

    def model_of(self, param: Any) -> Any:
        return None

    def models_of(self, optimizer: Any) -> Sequence[Any]:
        return ()

    def user_site(self, frame: Any = None) -> CallSite | None:
        return self.site

    def user_location(self, frame: Any = None, **extra: Any) -> Location:
        return self.site.location(**extra) if self.site else Location(**extra)

    def user_site_from_traceback(self, tb: Any) -> CallSite | None:
        return self.site

    def optimizer_site(self, optimizer: Any) -> CallSite | None:
        return None

    def is_user_file(self, path: str) -> bool:
        return True

    def defer(self, tensors: Any, callback: Callable[[list[float]], None]) -> None:
        callback([float(t) for t in tensors])

    def emit(self, finding: Finding) -> None:
        self.findings[finding.merge_key] = finding

    def set_fact(self, key: str, value: Any) -> None:
        self.facts[key] = value

    def add_series(self, name: str, values: Sequence[float]) -> None:
        self.facts[f"series:{name}"] = list(values)


def attach(detector: RuntimeDetector, monitor: FakeMonitor) -> RuntimeDetector:
    """Wire a detector to a fake monitor, as the real one does."""
    codes = next(
        (i.codes for i in registered_detectors(Depth.RUN) if i.target is type(detector)), ()
    )
    detector.reporter = Reporter(monitor.emit, Depth.RUN, codes)
    detector.on_attach(monitor)  # type: ignore[arg-type]
    return detector


def finish(detector: RuntimeDetector, monitor: FakeMonitor) -> list[Finding]:
    """Run ``on_finish`` and return every finding emitted."""
    report = Report()
    report.extend(monitor.findings.values())
    detector.on_finish(report)
    return list(monitor.findings.values())


def codes(findings: Sequence[Finding] | Report) -> set[str]:
    """The rule codes present."""
    return {f.code for f in findings}
