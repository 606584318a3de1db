"""What the runtime's pieces use of the monitor, as small typed protocols.

The hook bodies (:mod:`~torchdoctor.runtime.events`), the loss stream
(:mod:`~torchdoctor.runtime.losses`) and the run's facts (:mod:`~torchdoctor.runtime.facts`)
work for the :class:`~torchdoctor.runtime.monitor.Monitor`, which builds them. They see
only the services declared here (dispatch, registry, user code, sampler, read-back, status,
options, a ``fail`` callback, ...), never the monitor's class, so none of them imports the
monitor (that would be an import circle) and mypy checks that the monitor provides them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import weakref

    from torchdoctor.facts import Facts
    from torchdoctor.runtime.detectors.base import CallSite
    from torchdoctor.runtime.discovery import ModelRegistry
    from torchdoctor.runtime.dispatch import Dispatcher
    from torchdoctor.runtime.frames import UserCode
    from torchdoctor.runtime.readback import Readback
    from torchdoctor.runtime.sampling import Sampler
    from torchdoctor.runtime.status import StatusLine

__all__ = ["RunCounts", "RunLimits", "RunServices"]


class RunLimits(Protocol):
    """The options the hook bodies read."""

    @property
    def max_steps(self) -> int | None:
        """Stop after this many optimizer steps."""

    @property
    def discovery_steps(self) -> int:
        """Optimizer steps during which the global module hook looks for models."""


class RunServices(Protocol):
    """What the monitor provides to its event handlers, loss stream and facts."""

    @property
    def enabled(self) -> bool:
        """False once the monitor failed, finished, or in a forked worker: hooks return."""

    @property
    def torch(self) -> Any:
        """The torch module."""

    @property
    def options(self) -> RunLimits:
        """How the run is watched."""

    @property
    def dispatch(self) -> Dispatcher:
        """The detectors and the findings they emitted."""

    @property
    def registry(self) -> ModelRegistry:
        """The models and optimizers known so far."""

    @property
    def user(self) -> UserCode:
        """Which frames and files are the user's."""

    @property
    def sampler(self) -> Sampler:
        """Which steps get full statistics."""

    @property
    def readback(self) -> Readback:
        """Reads device values back without a synchronisation."""

    @property
    def status(self) -> StatusLine:
        """The live status line."""

    @property
    def facts(self) -> Facts:
        """The run's facts, for the report."""

    @property
    def optimizer_sites(self) -> weakref.WeakKeyDictionary[Any, CallSite]:
        """Where each optimizer built during the run was built."""

    def fail(self, error: BaseException, where: str) -> None:
        """The monitor's own code failed: report it and stop watching."""

    def set_fact(self, key: str, value: Any) -> None:
        """Record one fact of the run."""

    def add_series(self, name: str, values: Sequence[float]) -> None:
        """Record one named sequence for plots."""

    def defer(self, tensors: Any, callback: Callable[[list[float]], None]) -> None:
        """Read ``tensors`` back later and hand their values to ``callback``."""

    def progress(self) -> None:
        """Hand the report so far to the progress callback if findings changed."""


class _Intervals(Protocol):
    @property
    def intervals(self) -> int:
        """Checks that saw parameters move without an optimizer step."""


class _Curves(Protocol):
    @property
    def series(self) -> Mapping[CallSite, list[float]]:
        """Loss values per call site of ``backward()``."""


class RunCounts(Protocol):
    """What the facts of a run read of its event stream."""

    @property
    def global_step(self) -> int:
        """Optimizer steps so far (the most of any optimizer)."""

    @property
    def backward_count(self) -> int:
        """``backward()`` calls so far."""

    @property
    def busy_s(self) -> float:
        """Seconds spent in the monitor's hooks."""

    @property
    def batches(self) -> int:
        """Batches the data loaders gave."""

    @property
    def batch_wait_s(self) -> float:
        """Seconds spent waiting for them."""

    @property
    def manual(self) -> _Intervals:
        """Parameters updated by hand."""

    @property
    def losses(self) -> _Curves:
        """The loss curves."""
