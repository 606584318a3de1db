"""Your own detectors: rules of your project, run by ``watch`` and ``check``.

torchdoctor's catalogue covers problems every training program can have. A project has
its own (a layer that must stay frozen, a loss that must stay below a bound at step 100):
write a detector for them, and its findings go through the same report, selection,
``# noqa``-free merging, renderers and exit codes as the built-in ones.

Codes: a custom rule's code is ``TDX`` plus three digits (``TDX001`` ... ``TDX999``), a
range torchdoctor never uses itself. Each detector declares the rules it reports as
:class:`CustomRule` records (name, severity, summary); a detector may also report
catalogued codes (``TD201``) it lists in ``codes``. ``--select``/``--ignore`` and
``select=``/``ignore=`` apply as to any code (``ignore=["TDX"]`` silences them all).

At run time (``torchdoctor.watch(detectors=[...])``), subclass :class:`Detector`: it is a
:class:`~torchdoctor.runtime.detectors.base.RuntimeDetector` (hooks are documented
no-ops; override the ones you need)::

    from torchdoctor.custom import CustomRule, Detector
    from torchdoctor import Severity

    class LossBudget(Detector):
        rules = (CustomRule("TDX001", "loss-over-budget", Severity.WARNING,
                            "The loss is above the project's budget after warm-up"),)

        def on_losses(self, losses):
            for loss in losses:
                if loss.step >= 100 and loss.value > 2.0:
                    self.emit(self.finding("TDX001", f"loss {loss.value:.2f} at step "
                                           f"{loss.step} is over 2.0"))

    with torchdoctor.watch(detectors=[LossBudget()]) as w:
        train()

In pre-flight (``torchdoctor.check(..., probes=[...])``), subclass :class:`Probe` and
implement :meth:`Probe.check`; it receives the check's context, whose stable attributes
are ``model``, ``loss_fn``, ``optimizer``, ``device``, ``seed``, ``batch`` (``inputs`` and
``targets``, already on ``device``) and ``enabled(code)``. The user's objects are
restored after every probe, as after the built-in ones.

A detector or probe that raises becomes one ``TD001`` finding naming it; the others carry
on. This module imports no torch.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

from torchdoctor.findings import Confidence, Depth, Finding, Location, Severity
from torchdoctor.rules.custom import CUSTOM_CODE, CustomRule
from torchdoctor.rules.custom import declared_codes as declared_codes  # re-exported
from torchdoctor.rules.custom import register_rules as register_rules  # re-exported
from torchdoctor.rules.registry import finding
from torchdoctor.runtime.detectors.base import RuntimeDetector

__all__ = ["CUSTOM_CODE", "CustomRule", "Detector", "Probe"]


class _Declares:
    """What user detectors and probes share: their rules and a finding builder."""

    rules: ClassVar[Sequence[CustomRule]] = ()
    codes: ClassVar[Sequence[str]] = ()
    depth: ClassVar[Depth]

    def finding(
        self,
        code: str,
        message: str,
        location: Location | None = None,
        *,
        fix_hint: str = "",
        evidence: Mapping[str, Any] | None = None,
        severity: Severity | None = None,
        confidence: Confidence = Confidence.HIGH,
    ) -> Finding:
        """A finding of one of this detector's rules (default place: the detector)."""
        return finding(
            code,
            message,
            location or Location(object=type(self).__name__),
            self.depth,
            fix_hint=fix_hint,
            evidence=evidence,
            severity=severity,
            confidence=confidence,
        )


class Detector(_Declares, RuntimeDetector):
    """Base class of your own runtime detectors: pass instances to
    ``torchdoctor.watch(detectors=[...])``.

    Declare the rules in ``rules`` (:class:`CustomRule`) and, optionally, catalogued codes
    in ``codes``; override the hooks of
    :class:`~torchdoctor.runtime.detectors.base.RuntimeDetector` you need; report with
    ``self.emit(self.finding(code, message, location))``. ``self.monitor`` (set before the
    first hook) offers the step, the models, module and parameter names and the user's
    line (:class:`~torchdoctor.runtime.detectors.base.MonitorView`).
    """

    depth: ClassVar[Depth] = Depth.RUN


class Probe(_Declares):
    """Base class of your own pre-flight probes: pass instances to
    ``torchdoctor.check(..., probes=[...])``.

    Declare the rules in ``rules`` and implement :meth:`check`.
    """

    depth: ClassVar[Depth] = Depth.CHECK

    @property
    def name(self) -> str:
        """The probe's name in reports (its class name)."""
        return type(self).__name__

    def check(self, ctx: Any) -> Iterable[Finding]:
        """Look at the check's context and return (or yield) findings.

        Stable attributes of ``ctx``: ``model``, ``loss_fn``, ``optimizer``, ``device``,
        ``seed``, ``batch.inputs``, ``batch.targets`` and ``enabled(code)``.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement check(ctx)")
