"""Turn the exception that ended a run into one finding: meaning, place, module, fixes.

Nothing runs until an exception exists, so the cost during training is zero.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from torchdoctor.findings import Depth, Finding, Location, Severity
from torchdoctor.rules.registry import finding
from torchdoctor.runtime.exceptions.catalogue import KnownError, match_known_error
from torchdoctor.runtime.exceptions.facts import Detail, ErrorFacts
from torchdoctor.runtime.exceptions.frames import (
    FrameRef,
    ModuleRef,
    embedded_traceback_frames,
    frames_of_traceback,
    running_module,
    user_frame,
)

__all__ = ["GENERIC_CODE", "explain_exception"]

GENERIC_CODE = "TD004"
_MAX_HEADLINE = 240
_MAX_FIXES = 3


def explain_exception(
    error: BaseException,
    *,
    models: Iterable[Any] = (),
    roots: Sequence[str] = (),
    step: int | None = None,
    optimizers: Iterable[Any] = (),
) -> Finding | None:
    """Explain the exception that ended a training run.

    Args:
        error: the exception; ``KeyboardInterrupt``, ``SystemExit`` and other
            ``BaseException``s that are not errors give ``None``.
        models: the models the monitor knows, to name the running module by its path.
        roots: the directories of the user's script, to find the user's own line.
        step: the optimizer step the run had reached, for the evidence.
        optimizers: the optimizers the monitor knows (an out-of-memory error says how
            much their state holds).

    Returns:
        One finding: a known error's rule (TD107, TD108, TD709, ...) or ``TD004``.
    """
    if not isinstance(error, Exception):
        return None
    models = tuple(models)
    matches = [
        (candidate, found)
        for candidate in _chain(error)
        if (found := match_known_error(_type_names(candidate), error_text(candidate)))
    ]
    if not matches:
        return _generic_finding(error, models, roots, step)
    # A wrapped error (a worker's death re-raised as "exited unexpectedly") says more in
    # its cause: prefer the deepest exception that is the same problem as the outermost.
    code = matches[0][1][0].code
    candidate, (entry, match) = [m for m in matches if m[1][0].code == code][-1]
    facts = dataclasses.replace(
        _facts(candidate, error, match, models, roots), optimizers=tuple(optimizers)
    )
    return _known_finding(entry, facts, _detail(entry, facts), candidate, step)


def _detail(entry: KnownError, facts: ErrorFacts) -> Detail:
    """The entry's specific explanation, or its general one when there is none."""
    found = None
    if entry.detail is not None:
        try:
            found = entry.detail(facts)
        except Exception:  # noqa: BLE001 - an odd message must still give a finding
            found = None
    return found or Detail(entry.meaning, entry.fixes)


def _chain(error: BaseException) -> Iterator[BaseException]:
    """The exception, then what it was explicitly raised from (``raise ... from``).

    An exception merely raised *while handling* another (``__context__``) is a new
    failure of its own: the one it interrupted did not end the run.
    """
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__


def error_text(error: BaseException) -> str:
    """The exception's message; a ``KeyError``'s without the quotes ``str()`` adds."""
    if isinstance(error, KeyError) and len(error.args) == 1 and isinstance(error.args[0], str):
        return error.args[0]
    return str(error)


def _type_names(error: BaseException) -> tuple[str, ...]:
    return tuple(f"{cls.__module__}.{cls.__qualname__}" for cls in type(error).__mro__)


def _place(
    error: BaseException,
    models: tuple[Any, ...],
    roots: Sequence[str],
) -> tuple[tuple[FrameRef, ...], FrameRef | None, ModuleRef | None]:
    frames = tuple(frames_of_traceback(error.__traceback__))
    quoted = embedded_traceback_frames(error_text(error))
    user = user_frame(quoted, roots) or user_frame(frames, roots)
    return frames, user, running_module(frames, models, user)


def _facts(
    error: BaseException,
    outermost: BaseException,
    match: Any,
    models: tuple[Any, ...],
    roots: Sequence[str],
) -> ErrorFacts:
    frames, user, module = _place(error, models, roots)
    if user is None and error is not outermost:
        # The cause was caught inside torch; the user's line is on the outer traceback.
        frames, user, module = _place(outermost, models, roots)
    return ErrorFacts(type(error).__name__, error_text(error), match, frames, user, module, models)


def _headline(error: BaseException) -> str:
    text = error_text(error)
    if isinstance(error, KeyError) and "\n" not in text:
        text = str(error)  # keep the quotes: KeyError: 'label'
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    text = f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__
    return text if len(text) <= _MAX_HEADLINE else text[: _MAX_HEADLINE - 3] + "..."


def _sentence(text: str) -> str:
    text = text.strip()
    if text and text[0].islower():
        text = text[0].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."


def _location(user: FrameRef | None, module: ModuleRef | None) -> Location:
    return Location(
        path=user.path if user else None,
        line=user.line if user else None,
        object=module.object if module else None,
        snippet=user.snippet if user else None,
    )


def _known_finding(
    entry: KnownError, facts: ErrorFacts, detail: Detail, error: BaseException, step: int | None
) -> Finding:
    user, module = facts.user, None if detail.asynchronous else facts.module
    if user is not None and detail.line is not None:
        user = FrameRef(user.path, detail.line, user.function, user.frame)
    where = f" (at {user.where})" if user else ""
    summary = _sentence(detail.summary)
    message = f"{summary[:-1]}{where}. The run died of `{_headline(error)}`."
    evidence = {
        "exception": facts.type_name,
        "error": _headline(error),
        "known_error": entry.key,
        "raised_at": facts.user.where if facts.user else None,
        "module": module.object if module else None,
        "module_type": module.type_name if module else None,
        "step": step,
        **detail.evidence,
    }
    fixes = " ".join(_sentence(fix) for fix in detail.fixes[:_MAX_FIXES])
    return finding(
        detail.code or entry.code,
        message,
        _location(user, module),
        Depth.RUN,
        fix_hint=fixes,
        severity=Severity.ERROR,
        evidence={k: v for k, v in evidence.items() if v is not None},
    )


def _generic_finding(
    error: BaseException, models: tuple[Any, ...], roots: Sequence[str], step: int | None
) -> Finding:
    _, user, module = _place(error, models, roots)
    if isinstance(error, SyntaxError) and error.filename and error.lineno:
        # The broken line is in the error itself: no frame of the script ever ran.
        user, module = FrameRef(error.filename, error.lineno, "<module>"), None
    where = f" at {user.where}" if user else ""
    inside = f", inside `{module.label}` ({module.type_name})" if module else ""
    message = f"The run died of `{_headline(error)}`{where}{inside}."
    fix = (
        f"Fix the `{type(error).__name__}` raised{where}; the script's traceback shows the "
        "whole call chain."
    )
    evidence = {
        "exception": type(error).__name__,
        "error": _headline(error),
        "raised_at": user.where if user else None,
        "module": module.object if module else None,
        "step": step,
    }
    return finding(
        GENERIC_CODE,
        message,
        _location(user, module),
        Depth.RUN,
        fix_hint=fix,
        evidence={k: v for k, v in evidence.items() if v is not None},
    )
