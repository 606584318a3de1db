"""Runtime detector: the warnings PyTorch shows during the run, explained and located.

The monitor wraps ``warnings.showwarning``, so a warning arrives here only after the
user's filters let it through, and it is still shown exactly as Python would show it.
Known warnings map to their own rule (a loss broadcasting its target -> TD306, a scheduler
stepped before the optimizer -> TD607) or to TD003 with an explanation; PyTorch's
information notices are dropped, and a warning whose meaning depends on the run (a
GradScaler switched off matters only if float16 autocast ran) waits for the end of the
run and stands only if the run showed it. Unknown and deprecation warnings are TD003
info; the user's own warnings are nothing. Each is located at the user's line, reported
once per rule and place, with the warning's first line as evidence.
"""

from __future__ import annotations

import enum
import re
import sys
from dataclasses import dataclass
from typing import Any

from torchdoctor.findings import Confidence, Depth, Finding, Location, Severity
from torchdoctor.rules.detectors import detector
from torchdoctor.rules.registry import finding
from torchdoctor.runtime.detectors.base import RuntimeDetector, WarningRecord
from torchdoctor.runtime.detectors.scopes import local_items
from torchdoctor.runtime.exceptions.frames import (
    FrameRef,
    frames_of_stack,
    is_library_file,
    is_torch_file,
    is_torchdoctor_file,
    user_frame,
)
from torchdoctor.runtime.exceptions.known_warnings import (
    ACCELERATOR_PRESENT,
    CAUSED_BY_TORCHDOCTOR,
    FP16_AUTOCAST,
    KNOWN_WARNINGS,
    TD003,
)

__all__ = ["Classified", "Origin", "TorchWarnings", "accelerator_present", "classify_warning"]

_MAX_TEXT = 160
_DEPRECATION_WRAPPERS = ("typing_extensions.py",)
_AUTOCAST_DENSE_CALLS = 2_000  # module calls checked one by one for float16 autocast
_AUTOCAST_STRIDE = 64
_DEPRECATIONS = (DeprecationWarning, PendingDeprecationWarning, FutureWarning)


class Origin(enum.Enum):
    """Whose code issued a warning."""

    TORCH = "torch"
    THIRD_PARTY = "third-party"
    USER = "user"
    TORCHDOCTOR = "torchdoctor"


@dataclass(frozen=True, slots=True)
class Classified:
    """What a warning means: its rule, severity, sentence and fix."""

    code: str
    severity: Severity
    meaning: str
    fix: str
    key: str
    source: str = "PyTorch"
    confidence: Confidence = Confidence.HIGH
    condition: str | None = None


def classify_warning(
    text: str, category: type[Warning], origin: Origin, function: str = "", issuing_line: str = ""
) -> Classified | None:
    """Map a warning to a rule, or ``None`` when it is not torchdoctor's business.

    Args:
        text: the warning's message.
        category: its class.
        origin: whose code issued it.
        function: the name of the function that issued it (``mse_loss``), for messages.
        issuing_line: the source line of the issuing frame. A warning issued from the
            user's own frame is their own ``warnings.warn`` when the line calls ``warn``;
            otherwise it came from the C++ of a torch operation called on that line.
    """
    if origin is Origin.TORCHDOCTOR or any(p.search(text) for p in CAUSED_BY_TORCHDOCTOR):
        return None
    for known in KNOWN_WARNINGS:
        match = known.pattern.search(text)
        if match is not None:
            if known.dropped:
                return None
            values = {
                **match.groupdict(),
                "function": function or "the loss",
                "broadcast": _broadcast(match.groupdict()),
            }
            severity = known.severity or _rule_severity(known.code)
            return Classified(
                known.code,
                severity,
                known.meaning.format(**values),
                known.fix.format(**values),
                known.key,
                condition=known.condition,
            )
    confidence = Confidence.HIGH
    if origin is Origin.USER:
        from_torch_cpp = category is UserWarning and "warn" not in issuing_line
        if not (from_torch_cpp or category.__module__.startswith("torch")):
            return None  # the user's own warning, or a C extension's such as NumPy's
        confidence = Confidence.MEDIUM
    deprecated = issubclass(category, _DEPRECATIONS)
    third_party = origin is Origin.THIRD_PARTY
    # Without an entry saying what it means for the run, a warning is information only.
    severity = Severity.INFO
    meaning = (
        "a deprecated API was used; it will change or go away in a later release"
        if deprecated
        else ""
    )
    fix = (
        "Replace the deprecated call as the warning says."
        if deprecated
        else "Address what the warning names; silence it with `warnings.filterwarnings` only "
        "once you know it is harmless."
    )
    return Classified(
        TD003,
        severity,
        meaning,
        fix,
        "other",
        "A library" if third_party else "PyTorch",
        confidence,
    )


def _rule_severity(code: str) -> Severity:
    from torchdoctor.rules.registry import get_rule

    return get_rule(code).severity


def _broadcast(groups: dict[str, Any]) -> str:
    """The shape two ``torch.Size([...])`` strings broadcast to, or ``"?"``."""
    if not (groups.get("input") and groups.get("target")):
        return "?"
    first, second = (
        [int(d) for d in re.findall(r"\d+", groups[name])] for name in ("input", "target")
    )
    size = max(len(first), len(second))
    first, second = [1] * (size - len(first)) + first, [1] * (size - len(second)) + second
    result = []
    for a, b in zip(first, second, strict=True):
        if a != b and 1 not in (a, b):
            return "incompatible shapes"
        result.append(max(a, b))
    return str(result)


def origin_of(issuer: FrameRef | None) -> Origin:
    """Whose code a warning's issuing frame belongs to."""
    if issuer is None:
        return Origin.THIRD_PARTY
    if is_torchdoctor_file(issuer.path):
        return Origin.TORCHDOCTOR
    if is_torch_file(issuer.path):
        return Origin.TORCH
    return Origin.THIRD_PARTY if is_library_file(issuer.path) else Origin.USER


def issuing_frame(stack: list[FrameRef]) -> FrameRef | None:
    """The frame that called ``warnings.warn`` (or the op whose C++ code warned).

    ``stack`` is outermost first and was taken inside the warning machinery: the innermost
    frames are torchdoctor's and the ``warnings`` module's.
    """
    warnings_file = sys.modules["warnings"].__file__ or ""
    for frame in reversed(stack):
        if frame.path == warnings_file or is_torchdoctor_file(frame.path):
            continue
        return frame
    return None


@detector("TD003", "TD306", "TD607", depth=Depth.RUN)
class TorchWarnings(RuntimeDetector):
    """Turns the warnings shown during the run into located, explained findings."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, str | None, int | None], dict[str, int]] = {}
        self._pending: list[tuple[WarningRecord, Classified, FrameRef | None]] = []
        self._places: dict[tuple[str, str, str], tuple[Location, FrameRef | None]] = {}
        self._autocast: _AutocastWatch | None = None

    def on_warning(self, record: WarningRecord) -> None:
        """Classify one shown warning and emit (or refresh) its finding."""
        stack = frames_of_stack(sys._getframe(1))
        issuer = issuing_frame(stack)
        origin = origin_of(issuer)
        if (
            issuer is not None
            and issuer.path.endswith(_DEPRECATION_WRAPPERS)
            and "torch." in record.message
        ):
            origin = Origin.TORCH  # `typing_extensions.deprecated` warning for torch's API
        classified = classify_warning(
            record.message,
            record.category,
            origin,
            issuer.function if issuer else "",
            (issuer.snippet or "") if issuer else "",
        )
        if classified is None:
            return
        user = user_frame(stack, [str(r) for r in self.monitor.user_roots])
        if classified.key == "scheduler-before-optimizer" and _grad_scaler_in_scope(user):
            classified = _skipped_by_scaler(classified)
        if classified.condition is not None:
            self._pending.append((record, classified, _detached(user)))
            if classified.condition == FP16_AUTOCAST and self._autocast is None:
                self._autocast = _AutocastWatch()
            return
        self.emit(self._finding(record, classified, user))

    def on_finish(self, report: Any) -> None:
        """Emit the conditional warnings whose condition the run showed."""
        watch, self._autocast = self._autocast, None
        seen = watch.stop() if watch is not None else False
        accelerator = accelerator_present() if self._pending else False
        for record, classified, user in self._pending:
            if (classified.condition == FP16_AUTOCAST and seen) or (
                classified.condition == ACCELERATOR_PRESENT and accelerator
            ):
                self.emit(self._finding(record, classified, user))
        self._pending.clear()

    def _finding(
        self, record: WarningRecord, classified: Classified, user: FrameRef | None
    ) -> Finding:
        headline = f"{record.category.__name__}: {_first_line(record.message)}"
        # One problem, one finding: the same warning shown again from another line (a
        # DataLoader warns when built and again when iterated) counts at its first place.
        first = self._places.get((classified.code, classified.key, headline))
        if first is not None:
            location, user = first
        elif user is not None:
            location = Location(path=user.path, line=user.line, snippet=user.snippet)
        else:
            location = Location(path=record.filename, line=record.lineno)
        self._places.setdefault(
            (classified.code, classified.key, headline), (location, _detached(user))
        )
        texts = self._seen.setdefault((classified.code, location.path, location.line), {})
        texts[headline] = texts.get(headline, 0) + 1
        where = f" at {user.where}" if user else ""
        said = f"{classified.source} warned{where}: " + "; ".join(f"`{t}`" for t in texts)
        message = f"{_sentence(classified.meaning)} ({said})." if classified.meaning else f"{said}."
        return finding(
            classified.code,
            message,
            location,
            Depth.RUN,
            fix_hint=classified.fix,
            severity=classified.severity,
            confidence=classified.confidence,
            evidence={
                "warning": headline,
                "category": record.category.__name__,
                "warned_in": f"{record.filename}:{record.lineno}",
                "step": record.global_step,
                "times_shown": sum(texts.values()),
                "known_warning": classified.key,
            },
        )


def accelerator_present() -> bool:
    """Whether torch sees an accelerator on this machine (``torch.accelerator``, CUDA
    before torch 2.6)."""
    import torch

    accelerator = getattr(torch, "accelerator", None)
    try:
        if accelerator is not None and accelerator.is_available():
            return True
        return bool(torch.cuda.is_available())
    except (RuntimeError, AttributeError):
        return False


def _first_line(text: str) -> str:
    """The warning's first line; a long one is cut at its first sentence, then shortened."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    if len(line) > _MAX_TEXT and ". " in line[:_MAX_TEXT]:
        line = line[: line.index(". ") + 1]
    return line if len(line) <= _MAX_TEXT else line[: _MAX_TEXT - 3] + "..."


def _detached(user: FrameRef | None) -> FrameRef | None:
    """``user`` without its live frame (kept until the end of the run, it must not keep the
    frame's locals alive)."""
    if user is None or user.frame is None:
        return user
    import dataclasses

    return dataclasses.replace(user, frame=None)


class _AutocastWatch:
    """Whether float16 autocast is on during any module call, from a global forward
    pre-hook installed only once a warning needs the answer, and removed once it is known."""

    def __init__(self) -> None:
        import torch

        self._torch = torch
        self.seen = False
        self._calls = 0
        register = getattr(torch.nn.modules.module, "register_module_forward_pre_hook", None)
        self._handle: Any = register(self._check) if register is not None else None

    def _check(self, module: Any, args: Any) -> None:
        self._calls += 1
        if self._calls > _AUTOCAST_DENSE_CALLS and self._calls % _AUTOCAST_STRIDE:
            return  # a long run without autocast: look at one call in a stride
        torch = self._torch
        for device in ("cpu", "cuda", "xpu", "mps"):
            try:
                if (
                    torch.is_autocast_enabled(device)
                    and torch.get_autocast_dtype(device) == torch.float16
                ):
                    self.seen = True
            except (RuntimeError, TypeError, AttributeError):  # no such device type here
                continue
        if self.seen:
            self.stop()

    def stop(self) -> bool:
        if self._handle is not None:
            self._handle.remove()
            self._handle = None
        return self.seen


def _sentence(text: str) -> str:
    text = text.strip()
    return text[0].upper() + text[1:] if text and text[0].islower() else text


def _grad_scaler_in_scope(user: FrameRef | None) -> bool:
    """Whether the user's frame sees an enabled ``GradScaler`` (locals or globals)."""
    if user is None or user.frame is None:
        return False
    values = [v for _, v in local_items(user.frame)] + list(user.frame.f_globals.values())
    return any(
        type(value).__name__ == "GradScaler"
        and type(value).__module__.startswith("torch")
        and getattr(value, "_enabled", True)
        for value in values
    )


def _skipped_by_scaler(classified: Classified) -> Classified:
    return Classified(
        classified.code,
        Severity.INFO,
        classified.meaning + "; with a GradScaler in use this may instead be a first "
        "`scaler.step(optimizer)` that skipped `optimizer.step()` because of inf/NaN "
        "gradients, which is normal while the scale calibrates",
        classified.fix + " If your loop already calls `scaler.step(optimizer)` before "
        "`scheduler.step()`, ignore this.",
        classified.key,
        classified.source,
        Confidence.LOW,
    )
