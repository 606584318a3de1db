"""Calling detectors: one dispatch list per hook, failures isolated, findings collected.

The dispatch lists are built from the hooks each detector class overrides. A detector that
has settled (it will never report anything more from a hook) takes itself off that hook's
list with :meth:`RuntimeDetector.unsubscribe`, so a long run stops paying for it. A detector
that raises is reported once as ``TD001`` (built by :mod:`torchdoctor._kernel`, naming it
and the rules it could no longer check) and removed from every list; the run and the other
detectors carry on.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from operator import methodcaller
from typing import Any

from torchdoctor._kernel import Reporter, internal_error, raised_by_signal_handler, wanted
from torchdoctor.errors import UsageError
from torchdoctor.findings import INTERNAL_ERROR_CODE, Depth, Finding, Location
from torchdoctor.rules.detectors import DetectorInfo
from torchdoctor.rules.selection import Selection
from torchdoctor.runtime.detectors.base import RuntimeDetector, overridden_hooks

__all__ = ["Dispatcher"]

FindingKey = tuple[str, str | None, int | None, str | None]

_drain: Callable[[Iterable[Any]], None] = deque(maxlen=0).extend  # consumes an iterator


class Dispatcher:
    """Detectors of one run, their hook lists, and the findings they emitted."""

    def __init__(
        self,
        infos: Iterable[DetectorInfo],
        selection: Selection,
        extra: Iterable[RuntimeDetector] = (),
    ) -> None:
        """Build the hook lists.

        Args:
            infos: registered detectors; one instance of each class whose codes are
                selected.
            selection: the run's ``--select``/``--ignore``.
            extra: detector instances given by the user (``watch(detectors=[...])``),
                after the built-in ones; see :mod:`torchdoctor.custom`.

        Raises:
            UsageError: a user detector is not a ``RuntimeDetector`` or declares no rule.
        """
        self.selection = selection
        self.findings: dict[FindingKey, Finding] = {}
        self.detectors: list[RuntimeDetector] = []
        self._codes: dict[int, tuple[str, ...]] = {}
        # hook -> (detector, method) of every live detector that overrides it, in order;
        # ``hooks`` is the same less the ones a detector unsubscribed from.
        self._all: dict[str, list[tuple[RuntimeDetector, Callable[[Any], None]]]] = {}
        self.hooks: dict[str, list[tuple[RuntimeDetector, Callable[[Any], None]]]] = {}
        # The same lists as bare methods: what call() runs at every step, with nothing to
        # unpack per detector (kept in step with ``hooks``).
        self._methods: dict[str, list[Callable[[Any], None]]] = {}
        # id(detector) -> the hooks it unsubscribed from (names without ":sampled").
        self._off: dict[int, frozenset[str]] = {}
        # Called when the lists change (the monitor re-reads wants_forward()).
        self.on_change: Callable[[], None] | None = None
        for info in infos:
            if not isinstance(info.target, type) or not issubclass(info.target, RuntimeDetector):
                continue
            if wanted(info.codes, selection):
                self._add(info.target(), info.codes)
        for detector in extra:
            self._add_user(detector)

    def _add_user(self, detector: RuntimeDetector) -> None:
        from torchdoctor.rules.custom import declared_codes

        if not isinstance(detector, RuntimeDetector):
            raise UsageError(
                f"detectors must be instances of torchdoctor.custom.Detector, got "
                f"{type(detector).__name__}"
                + (" (a class: pass an instance)" if isinstance(detector, type) else "")
            )
        codes = declared_codes(detector, Depth.RUN)
        if wanted(codes, self.selection):
            self._add(detector, codes)

    def _add(self, detector: RuntimeDetector, codes: tuple[str, ...]) -> None:
        detector.reporter = Reporter(self.emit, Depth.RUN, codes)
        detector.subscriptions = self.subscribe
        self.detectors.append(detector)
        self._codes[id(detector)] = codes
        for hook in overridden_hooks(type(detector)):
            method = getattr(detector, hook.split(":")[0])
            self._all.setdefault(hook, []).append((detector, method))
            self.hooks.setdefault(hook, []).append((detector, method))
            self._methods.setdefault(hook, []).append(method)

    def subscribe(self, detector: RuntimeDetector, hooks: frozenset[str], on: bool) -> None:
        """Put ``detector`` back on (``on``) or take it off the lists of ``hooks`` (plain
        names: ``"on_step_end"`` covers its sampled list too). A live detector's
        ``subscriptions``: it is unset when the detector is switched off."""
        off = self._off.get(id(detector), frozenset())
        changed = off - hooks if on else off | hooks
        if changed != off:
            self._off[id(detector)] = changed
            self._rebuild(hooks)

    def _rebuild(self, names: Iterable[str]) -> None:
        """The lists of the hooks ``names`` (and their sampled lists) again, as new lists:
        a call() may be iterating over an old one (a detector unsubscribing from its hook)."""
        off = self._off
        for name in names:
            for hook in (name, f"{name}:sampled"):
                entries = self._all.get(hook)
                if entries is None:
                    continue
                live = [e for e in entries if name not in off.get(id(e[0]), ())]
                self.hooks[hook] = live
                self._methods[hook] = [method for _, method in live]
        if self.on_change is not None and "on_forward" in names:
            self.on_change()

    def wants(self, hook: str) -> bool:
        """Whether any live detector overrides ``hook`` (for every step or sampled ones)."""
        return bool(self.hooks.get(hook) or self.hooks.get(f"{hook}:sampled"))

    def wants_forward(self) -> str | None:
        """``"always"``, ``"no_grad"``, or ``None``: which root-model calls to deliver."""
        wanted = {d.wants_forward for d, _ in self.hooks.get("on_forward", ())}
        if True in wanted:
            return "always"
        return "no_grad" if "no_grad" in wanted else None

    def call(self, hook: str, argument: Any) -> None:
        """Call ``hook(argument)`` on every detector that has it."""
        methods = self._methods.get(hook)
        if not methods:
            return
        # Runs at every step: the loop runs in C (map, drained by a zero-length deque), and
        # one try surrounds it. No copy: a list is replaced, never changed, when detectors
        # unsubscribe or fail during this loop.
        pending = iter(methods)
        try:
            _drain(map(methodcaller("__call__", argument), pending))
        except Exception as error:  # noqa: BLE001 - isolate the detector's bug
            if raised_by_signal_handler(error):
                raise
            # map takes one method at a time: the one that raised is the last one taken.
            rest = list(pending)
            self._failed(hook, methods[len(methods) - len(rest) - 1], rest, argument, error)

    def _failed(
        self,
        hook: str,
        method: Callable[[Any], None],
        rest: list[Callable[[Any], None]],
        argument: Any,
        error: BaseException,
    ) -> None:
        """``method`` raised in :meth:`call`: switch its detector off and call the ones
        after it, ``rest``, as if each had been called on its own."""
        # Looked up in the full list: the live one may have been rebuilt since (a detector
        # unsubscribed), from the same entries.
        detector = next((d for d, m in self._all.get(hook, ()) if m is method), None)
        if detector is not None:
            self.disable(detector, error, hook)
        pending = iter(rest)
        try:
            _drain(map(methodcaller("__call__", argument), pending))
        except Exception as later:  # noqa: BLE001
            if raised_by_signal_handler(later):
                raise
            left = list(pending)
            self._failed(hook, rest[len(rest) - len(left) - 1], left, argument, later)

    def clear(self) -> None:
        """Forget every detector and hook list (the run is over)."""
        for detector in self.detectors:
            detector.subscriptions = None
        self.detectors.clear()
        self._all.clear()
        self.hooks.clear()
        self._methods.clear()
        self._off.clear()
        self.on_change = None

    def guarded(self, detector: RuntimeDetector, callback: Callable[..., None], *args: Any) -> None:
        """Run a detector's callback (a deferred read-back) with the same isolation."""
        if not any(d is detector for d in self.detectors):
            return
        try:
            callback(*args)
        except Exception as error:  # noqa: BLE001
            if raised_by_signal_handler(error):
                raise
            self.disable(detector, error, getattr(callback, "__name__", "callback"))

    def emit(self, item: Finding) -> None:
        """Store a finding, replacing an earlier one with the same rule and place."""
        if self.selection.is_enabled(item.code):
            self.findings[item.merge_key] = item

    def disable(self, detector: RuntimeDetector, error: BaseException, hook: str) -> None:
        """Switch a failed detector off and report it once as ``TD001``."""
        if detector not in self.detectors:
            return
        self.detectors.remove(detector)
        detector.subscriptions = None
        for hook, entries in self._all.items():
            self._all[hook] = [e for e in entries if e[0] is not detector]
        self._rebuild({hook.split(":")[0] for hook in self._all})
        codes = self._codes.get(id(detector), ())
        self._record(
            f"detector {detector.name}",
            internal_error(
                f"runtime detector `{detector.name}`",
                error,
                Depth.RUN,
                Location(object=f"detector {detector.name}"),
                codes=codes,
                during=f" in `{hook}`",
                consequence=f"it was switched off; rules {', '.join(codes)} were not checked "
                "for the rest of the run",
            ),
        )

    def internal_error(self, message: str, obj: str, error: BaseException | None = None) -> None:
        """Record a ``TD001`` finding about torchdoctor itself (the monitor, not one
        detector)."""
        self._record(
            obj, internal_error(obj, error, Depth.RUN, Location(object=obj), message=message)
        )

    def _record(self, obj: str, item: Finding) -> None:
        self.findings[(INTERNAL_ERROR_CODE, None, None, obj)] = item
