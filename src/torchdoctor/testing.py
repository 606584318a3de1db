"""Assertions for test suites: a training setup is healthy, a report is clean.

::

    from torchdoctor.testing import assert_healthy

    def test_model_trains():
        model, batch = make_model(), make_batch()
        assert_healthy(model, batch, nn.CrossEntropyLoss(), torch.optim.AdamW(model.parameters()))

A failing assertion's message is the text report, so the test output says what is wrong,
where, and how to fix it. The pytest plugin (:mod:`torchdoctor.pytest_plugin`, loaded
automatically once torchdoctor is installed) offers the same through its ``torchdoctor``
fixture and the ``@pytest.mark.torchdoctor`` marker.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from torchdoctor.findings import Report, Severity

__all__ = ["DEFAULT_FAIL_ON", "ReportAssertionError", "assert_clean", "assert_healthy"]

DEFAULT_FAIL_ON = Severity.WARNING
"""Errors and warnings fail; info findings never do."""


class ReportAssertionError(AssertionError):
    """A report had findings at or above the severity that fails; ``report`` holds it."""

    def __init__(self, message: str, report: Report) -> None:
        super().__init__(message)
        self.report = report


def assert_healthy(
    model: Any,
    data: Any,
    loss_fn: Callable[..., Any],
    optimizer: Any | None = None,
    *,
    ignore: Iterable[str] = (),
    select: Iterable[str] | None = None,
    fail_on: Severity | str = DEFAULT_FAIL_ON,
    device: Any | None = None,
    seed: int = 0,
) -> Report:
    """Run :func:`torchdoctor.check` and fail when it finds a problem.

    Args:
        model, data, loss_fn, optimizer: what :func:`torchdoctor.check` takes.
        ignore: rule codes or prefixes that must not fail the test (``["TD409"]``).
        select: only these codes or prefixes; default all.
        fail_on: the lowest severity that fails (default warning).
        device, seed: passed to :func:`torchdoctor.check`.

    Returns:
        The check's report, when nothing failed.

    Raises:
        ReportAssertionError: a finding at or above ``fail_on``; the message is the report.
    """
    __tracebackhide__ = True
    import torchdoctor

    report = torchdoctor.check(
        model,
        data,
        loss_fn,
        optimizer,
        device=device,
        select=select,
        ignore=list(ignore) or None,
        seed=seed,
    )
    assert_clean(report, fail_on=fail_on, title="torchdoctor check")
    return report


def assert_clean(
    report: Report,
    *,
    fail_on: Severity | str = DEFAULT_FAIL_ON,
    ignore: Iterable[str] = (),
    title: str | None = None,
) -> None:
    """Fail when ``report`` has a finding at or above ``fail_on`` (not in ``ignore``).

    Raises:
        ReportAssertionError: with the text report as its message.
    """
    __tracebackhide__ = True
    threshold = Severity(fail_on) if isinstance(fail_on, str) else fail_on
    ignored = tuple(ignore)
    failing = [
        f
        for f in report.findings
        if f.severity >= threshold and not any(f.code.startswith(p) for p in ignored)
    ]
    if failing:
        raise ReportAssertionError(failure_message(report, failing, threshold, title), report)


def failure_message(
    report: Report, failing: list[Any], threshold: Severity, title: str | None = None
) -> str:
    """The assertion message: what failed, then the whole text report."""
    from torchdoctor.report import RenderOptions, render

    codes = ", ".join(sorted({f.code for f in failing}))
    head = (
        f"torchdoctor found {len(failing)} problem{'s' if len(failing) != 1 else ''} at "
        f"or above {threshold.value} ({codes}):"
    )
    body = render(report, "text", RenderOptions(width=100, title=title))
    return f"{head}\n\n{body}"
