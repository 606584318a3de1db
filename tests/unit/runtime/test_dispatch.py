"""The dispatch lists: detectors unsubscribe from hooks once settled, and come back; a
failing detector is switched off while the ones after it still get the event."""

from __future__ import annotations

from typing import Any

from torchdoctor.findings import INTERNAL_ERROR_CODE, Depth
from torchdoctor.rules.detectors import DetectorInfo
from torchdoctor.rules.selection import Selection
from torchdoctor.runtime.detectors.base import RuntimeDetector
from torchdoctor.runtime.dispatch import Dispatcher


class Counting(RuntimeDetector):
    """Records the events it gets; unsubscribes from on_step_end after ``settle_after``."""

    settle_after: int | None = None

    def __init__(self) -> None:
        self.seen: list[tuple[str, Any]] = []

    def on_backward(self, event: Any) -> None:
        self.seen.append(("on_backward", event))

    def on_step_end(self, event: Any) -> None:
        self.seen.append(("on_step_end", event))
        if self.settle_after is not None and len(self.seen) >= self.settle_after:
            self.unsubscribe("on_step_end")


class First(Counting):
    pass


class Second(Counting):
    settle_after = 2


class Third(Counting):
    pass


class Failing(Counting):
    def on_step_end(self, event: Any) -> None:
        super().on_step_end(event)
        raise RuntimeError("boom")


def dispatcher(*classes: type[RuntimeDetector]) -> Dispatcher:
    return Dispatcher([DetectorInfo(("TD612",), Depth.RUN, cls) for cls in classes], Selection())


def by_class(dispatch: Dispatcher, cls: type) -> Any:
    return next(d for d in dispatch.detectors if type(d) is cls)


def test_a_detector_that_unsubscribes_in_its_hook_gets_no_more_of_that_hook() -> None:
    dispatch = dispatcher(First, Second, Third)
    for step in range(4):
        dispatch.call("on_step_end", step)
    second = by_class(dispatch, Second)
    assert second.seen == [("on_step_end", 0), ("on_step_end", 1)]
    assert by_class(dispatch, First).seen == [("on_step_end", s) for s in range(4)]
    assert by_class(dispatch, Third).seen == [("on_step_end", s) for s in range(4)]
    dispatch.call("on_backward", "b")  # its other hooks still come
    assert second.seen[-1] == ("on_backward", "b")


def test_resubscribing_puts_the_detector_back_in_its_place() -> None:
    dispatch = dispatcher(First, Second, Third)
    second = by_class(dispatch, Second)
    second.unsubscribe()  # every per-step hook
    assert [type(d) for d, _ in dispatch.hooks["on_backward"]] == [First, Third]
    second.resubscribe("on_backward")
    assert [type(d) for d, _ in dispatch.hooks["on_backward"]] == [First, Second, Third]
    assert [type(d) for d, _ in dispatch.hooks["on_step_end"]] == [First, Third]


def test_wants_follows_the_subscriptions() -> None:
    dispatch = dispatcher(Second)
    assert dispatch.wants("on_step_end")
    by_class(dispatch, Second).unsubscribe("on_step_end")
    assert not dispatch.wants("on_step_end") and dispatch.wants("on_backward")
    dispatch.call("on_step_end", 0)  # nobody listens: nothing happens
    assert by_class(dispatch, Second).seen == []


def test_a_failing_detector_is_switched_off_and_the_later_ones_still_get_the_event() -> None:
    dispatch = dispatcher(First, Failing, Third)
    dispatch.call("on_step_end", 0)
    dispatch.call("on_step_end", 1)
    assert by_class(dispatch, Third).seen == [("on_step_end", 0), ("on_step_end", 1)]
    assert not any(type(d) is Failing for d in dispatch.detectors)
    [internal] = [f for f in dispatch.findings.values() if f.code == INTERNAL_ERROR_CODE]
    assert "Failing" in internal.message and "boom" in internal.message


def test_a_switched_off_detector_can_no_longer_subscribe() -> None:
    dispatch = dispatcher(Failing, Third)
    failing = by_class(dispatch, Failing)
    dispatch.call("on_step_end", 0)
    failing.resubscribe()
    assert [type(d) for d, _ in dispatch.hooks["on_backward"]] == [Third]


class SettlesAtOnce(Counting):
    settle_after = 1


def test_a_failure_after_an_unsubscription_in_the_same_event_is_still_isolated() -> None:
    dispatch = dispatcher(SettlesAtOnce, Failing, Third)
    dispatch.call("on_step_end", 0)  # the list is rebuilt, then Failing raises
    dispatch.call("on_step_end", 1)
    assert [type(d) for d, _ in dispatch.hooks["on_step_end"]] == [Third]
    assert by_class(dispatch, Third).seen == [("on_step_end", 0), ("on_step_end", 1)]
    assert by_class(dispatch, SettlesAtOnce).seen == [("on_step_end", 0)]
