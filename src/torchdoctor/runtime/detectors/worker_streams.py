"""DataLoader workers that share one random stream (TD410 at run time; ``check`` asks the
same verdict on the loader it is given).

The invariant: workers of one loader draw different random numbers. Torch seeds
``torch``, ``random`` and numpy's global generator in every worker from a per-worker seed,
but a generator the dataset carries itself (``self.rng = np.random.default_rng(0)``, a
``RandomState``, a ``random.Random``) is copied into every worker in the same state, and a
``worker_init_fn`` may seed every worker alike; then each augmentation repeats once per
worker, and, with workers restarted each epoch, every epoch.

``DataLoader.__iter__`` is wrapped for the run. The first time a map-style loader with
workers starts iterating, :func:`torchdoctor.runtime.worker_streams.shared_stream`
loads sample 0 twice in each of two workers of a clone (the user's loader, sampler and
generators are not touched; the process's random states are put back; the clone's workers
write nothing and are shut down at once). Cost: two worker start-ups and four samples, once
per loader. Loaders over an ``IterableDataset`` (no sample 0 to ask for twice) are not
judged.
"""

from __future__ import annotations

import weakref
from typing import Any

from torchdoctor.findings import Depth, Report
from torchdoctor.rules.detectors import detector
from torchdoctor.rules.registry import finding
from torchdoctor.runtime.detectors.base import MonitorView, RuntimeDetector
from torchdoctor.runtime.patches import Patches, before_call

__all__ = ["IdenticalWorkerAugmentations"]


@detector("TD410", depth=Depth.RUN)
class IdenticalWorkerAugmentations(RuntimeDetector):
    """Judges each map-style loader with workers once, when it starts iterating."""

    def __init__(self) -> None:
        self._patches = Patches(alive=self.attached)
        self._judged: weakref.WeakSet[Any] = weakref.WeakSet()
        self._busy = False  # the clone's own iteration passes through the wrapper too
        self._error: BaseException | None = None

    def on_attach(self, monitor: MonitorView) -> None:
        super().on_attach(monitor)
        from torch.utils.data import DataLoader

        # Before the loader's own workers start: torch reports a worker of the user's that
        # dies through a SIGCHLD handler that raises wherever the main thread is, and it
        # must not be inside our probe (which would swallow it) but in the user's loop.
        self._patches.wrap(
            DataLoader, "__iter__", before_call(self._patches, self._started, self._failed)
        )

    def _failed(self, error: BaseException) -> None:
        self._error = error

    def _started(self, loader: Any, *args: Any, **kwargs: Any) -> None:
        from torch.utils.data import IterableDataset

        if self._busy or not getattr(loader, "num_workers", 0) or loader in self._judged:
            return
        if not getattr(self.monitor, "enabled", True):  # a forked worker iterating a loader
            return
        self._judged.add(loader)
        if isinstance(loader.dataset, IterableDataset):
            return
        verdict = self._draw(loader)
        if verdict is None:
            return
        place = verdict.culprit or verdict.dataset
        self.emit(
            finding(
                "TD410",
                verdict.message(),
                self.monitor.user_location(object=place),
                Depth.RUN,
                fix_hint=verdict.fix_hint(),
                evidence=verdict.evidence(),
            )
        )

    def _draw(self, loader: Any) -> Any:
        """The verdict, with the run's batch accounting off and its random states kept."""
        from torchdoctor.runtime.worker_streams import shared_stream

        monitor: Any = self.monitor
        saved = _random_states()
        enabled, monitor.enabled = monitor.enabled, False  # the clone's batches are not the run's
        self._busy = True
        try:
            return shared_stream(loader)
        except Exception:  # noqa: BLE001 - the user's dataset failed in a worker: no verdict
            return None
        finally:
            self._busy = False
            monitor.enabled = enabled
            _restore(saved)

    def on_finish(self, report: Report) -> None:
        self._patches.remove()
        if self._error is not None:
            raise self._error  # a failure of ours in the wrapper: one TD001, as elsewhere


def _random_states() -> tuple[Any, Any, Any]:
    import random

    import torch

    try:
        import numpy

        numpy_state = numpy.random.get_state()
    except ImportError:  # pragma: no cover - numpy comes with torch's usual installs
        numpy_state = None
    return torch.get_rng_state(), random.getstate(), numpy_state


def _restore(saved: tuple[Any, Any, Any]) -> None:
    import random

    import torch

    torch.set_rng_state(saved[0])
    random.setstate(saved[1])
    if saved[2] is not None:
        import numpy

        numpy.random.set_state(saved[2])
