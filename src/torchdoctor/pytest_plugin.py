"""torchdoctor's pytest plugin: a ``torchdoctor`` fixture and a ``torchdoctor`` marker.

Installed with torchdoctor (entry point ``pytest11``), so nothing needs configuring::

    def test_setup_is_healthy(torchdoctor):
        torchdoctor.assert_healthy(model, batch, loss_fn, optimizer, ignore=["TD409"])

    @pytest.mark.torchdoctor(fail_on="error", ignore=["TD7"])
    def test_one_epoch():
        train_one_epoch(model, loader, optimizer)   # watched; an error finding fails it

The marker watches the test's own call (not its fixtures) with :func:`torchdoctor.watch`;
findings at or above ``fail_on`` (default ``"error"``) fail the test with the report as
the message, and any finding is shown in a "torchdoctor" section of the test's output.
Loading the plugin imports neither torch nor the rest of torchdoctor.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable
from contextlib import contextmanager
from typing import Any

import pytest

__all__ = ["Doctor"]

_MARKER_HELP = (
    "torchdoctor(fail_on='error', select=None, ignore=None): watch the training this test "
    "runs with torchdoctor and fail it on findings at or above fail_on"
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", _MARKER_HELP)


class Doctor:
    """What the ``torchdoctor`` fixture gives a test: check, watch and assert."""

    def __init__(self, test_file: str) -> None:
        self._test_file = test_file
        self.reports: list[Any] = []

    def check(
        self,
        model: Any,
        data: Any,
        loss_fn: Callable[..., Any],
        optimizer: Any | None = None,
        **options: Any,
    ) -> Any:
        """:func:`torchdoctor.check`; the report is also kept in :attr:`reports`."""
        import torchdoctor

        report = torchdoctor.check(model, data, loss_fn, optimizer, **options)
        self.reports.append(report)
        return report

    def assert_healthy(
        self,
        model: Any,
        data: Any,
        loss_fn: Callable[..., Any],
        optimizer: Any | None = None,
        **options: Any,
    ) -> Any:
        """:func:`torchdoctor.testing.assert_healthy`."""
        __tracebackhide__ = True
        from torchdoctor.testing import assert_healthy

        report = assert_healthy(model, data, loss_fn, optimizer, **options)
        self.reports.append(report)
        return report

    @contextmanager
    def watch(
        self,
        *,
        fail_on: str = "error",
        select: Iterable[str] | None = None,
        ignore: Iterable[str] | None = None,
        **options: Any,
    ) -> Generator[Any, None, None]:
        """Watch the block's training; fail at its end on findings at or above ``fail_on``.

        Yields the :class:`~torchdoctor.runtime.watch.Watch` (``w.report`` after the block).
        """
        __tracebackhide__ = True
        from torchdoctor.runtime.watch import watch
        from torchdoctor.testing import assert_clean

        watcher = watch(select=select, ignore=ignore, _caller=self._test_file, **options)
        with watcher:
            yield watcher
        self.reports.append(watcher.report)
        assert_clean(watcher.report, fail_on=fail_on, title="torchdoctor watch")


@pytest.fixture
def torchdoctor(request: pytest.FixtureRequest) -> Doctor:
    """torchdoctor's checks for this test: ``check``, ``assert_healthy`` and ``watch``."""
    return Doctor(str(request.path))


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> Generator[None, Any, Any]:
    marker = pyfuncitem.get_closest_marker("torchdoctor")
    if marker is None:
        return (yield)
    fail_on, select, ignore = _marker_options(marker)
    from torchdoctor.runtime.watch import watch
    from torchdoctor.testing import assert_clean

    watcher = watch(select=select, ignore=ignore, _caller=str(pyfuncitem.path))
    with watcher:
        result = yield
    report = watcher.report
    if len(report):
        from torchdoctor.report import RenderOptions, render

        pyfuncitem.add_report_section(
            "call", "torchdoctor", render(report, "text", RenderOptions(width=100))
        )
    assert_clean(report, fail_on=fail_on, title=f"torchdoctor watch {pyfuncitem.name}")
    return result


def _marker_options(marker: pytest.Mark) -> tuple[str, list[str] | None, list[str] | None]:
    unknown = set(marker.kwargs) - {"fail_on", "select", "ignore"}
    if marker.args or unknown:
        raise pytest.UsageError(
            "@pytest.mark.torchdoctor takes only the keywords fail_on, select and ignore"
        )
    fail_on = str(marker.kwargs.get("fail_on", "error"))
    if fail_on not in ("error", "warning", "info"):
        raise pytest.UsageError(
            f"@pytest.mark.torchdoctor: fail_on={fail_on!r} is not "
            "one of 'error', 'warning', 'info'"
        )
    return fail_on, _codes(marker.kwargs.get("select")), _codes(marker.kwargs.get("ignore"))


def _codes(value: Any) -> list[str] | None:
    if value is None:
        return None
    return [value] if isinstance(value, str) else [str(v) for v in value]
