"""The shared state every probe reads: the user's objects and work computed once.

Probes never run their own forward and backward passes when the context already has
them: the whole check stays within a few dozen training steps. The shared passes here run
on the user's own model; the engine restores the model (tensors, modes and plain
attributes), optimizer and RNGs after every probe (:mod:`torchdoctor.preflight.snapshot`).
Probes that train or experiment work on copies from
:func:`torchdoctor.preflight.training.copy_for_training`. Batches come from a replay of the
user's loader (:mod:`torchdoctor.preflight.loading`), never from the loader itself.
"""

from __future__ import annotations

import functools
from typing import Any

from torchdoctor.errors import UsageError, UserCodeError
from torchdoctor.preflight.batch import (
    Batch,
    is_batch,
    iter_tensors,
    model_dtype,
    move_to,
    split_batch,
)
from torchdoctor.preflight.failures import call_user
from torchdoctor.preflight.loading import LoaderState, replay_loader, replayable, shut_down
from torchdoctor.preflight.losses import LossKind, LossSpec, recognise_loss
from torchdoctor.preflight.passes import TrainPass, run_train_pass
from torchdoctor.preflight.step import StepLoss, StepRunner, whole_batch_step
from torchdoctor.preflight.tracing import display_name
from torchdoctor.rules.selection import Selection

__all__ = ["CheckContext"]


class CheckContext:
    """What a probe gets: the user's objects, options, and cached shared work.

    Attributes:
        model: the user's ``nn.Module``.
        data: the batch or the loader, as given.
        loss_fn: the user's loss callable, ``loss_fn(output, targets)``; with a step, a
            :class:`~torchdoctor.preflight.step.StepLoss` that gives the step's loss.
        runner: runs the user's ``step(model, batch)`` (or ``model(**batch)`` for a model
            that computes its own loss), or ``None`` when batches are split.
        optimizer: the user's optimizer, or ``None``.
        selection: enabled rule codes; :meth:`enabled` asks it.
        seed: seed used before every forward the check runs, so runs are repeatable.
        requested_device: the ``device`` the user asked for, or ``None``.
        loader: ``data`` when it is a loader (not a single batch), else ``None``.
        step_times: wall seconds of training steps the overfit run timed on its copy (after
            its first step, at the check's thread count, on the CPU only); the loader
            probe compares the loader with these instead of timing steps of its own.
    """

    def __init__(
        self,
        model: Any,
        data: Any,
        loss_fn: Any,
        optimizer: Any | None = None,
        *,
        device: Any | None = None,
        selection: Selection | None = None,
        seed: int = 0,
        step: Any | None = None,
    ) -> None:
        self.model = model
        self.data = data
        self.runner = (
            StepRunner(step or whole_batch_step) if step is not None or loss_fn is None else None
        )
        self.loss_fn = StepLoss(self.runner) if self.runner is not None else loss_fn
        self.optimizer = optimizer
        self.selection = selection or Selection()
        self.seed = seed
        self.requested_device = device
        self.loader = None if is_batch(data) else data
        self._iterator: Any = None
        self._loader_state: LoaderState | None = None
        self.step_times: list[float] = []
        # Loss per step of the probes' own training runs (the overfit-one-batch curve),
        # which the report keeps as series for plots.
        self.curves: dict[str, list[float]] = {}
        self.forecast_options: Any = None  # ForecastOptions, when a forecast is asked for

    def enabled(self, code: str) -> bool:
        """Whether findings of ``code`` will be reported (skip work for disabled ones)."""
        return self.selection.is_enabled(code)

    def name(self, path: str) -> str:
        """A module path for messages (the root module shows as its class name)."""
        return display_name(path, self.model)

    # --- the device and the batch -------------------------------------------------------

    @functools.cached_property
    def model_device(self) -> Any:
        """Device of the model's first parameter (or buffer); CPU for a stateless model."""
        import torch

        for tensor in (*self.model.parameters(), *self.model.buffers()):
            return tensor.device
        return torch.device("cpu")

    @functools.cached_property
    def device(self) -> Any:
        """Where the batch goes: the requested device, else the model's device."""
        import torch

        if self.requested_device is None:
            return self.model_device
        try:
            return torch.device(self.requested_device)
        except (RuntimeError, TypeError) as error:
            raise UsageError(f"invalid device {self.requested_device!r}: {error}") from None

    @functools.cached_property
    def raw_batch(self) -> Any:
        """The first batch as the data gives it (on its own device)."""
        batches = self.peek_batches(1)
        if not batches:
            raise UsageError("the data loader is empty: it yields no batch")
        return batches[0]

    def peek_batches(self, count: int) -> list[Any]:
        """The first ``count`` batches of one pass over the loader (fewer if it ends).

        With a single batch for ``data`` this is ``[data]``. Every probe sees the same
        pass: the first batch here is :attr:`raw_batch`. The pass is the one the user's
        loader would give next, read from a replay of it (see :meth:`_start_pass`).
        """
        if self.loader is None:
            return [self.data]
        cached: list[Any] = self.__dict__.setdefault("_peeked", [])
        if len(cached) < count and self._iterator is None and not cached:
            self._iterator = self._start_pass()
        while len(cached) < count and self._iterator is not None:
            try:
                cached.append(call_user("loading a batch", next, self._iterator))
            except UserCodeError as error:
                if not isinstance(error.original, StopIteration):
                    raise
                self._end_pass()
        return cached[:count]

    def _start_pass(self) -> Any:
        """An iterator over the user's data that changes nothing the user holds.

        A DataLoader is replayed from copies of its sampler and generator; one whose class
        iterates its own way (or whose sampler cannot be copied) is iterated in place, and
        :class:`LoaderState` rewinds its generators and ends its workers afterwards.
        """
        source = self.loader
        if replayable(source):
            try:
                source = replay_loader(source)
            except Exception:  # noqa: BLE001 - a sampler we cannot copy: iterate in place
                source = self.loader
        if source is self.loader and hasattr(source, "__dict__"):
            self._loader_state = LoaderState(source)
        return call_user("iterating the data loader", iter, source)

    def _end_pass(self) -> None:
        iterator, self._iterator = self._iterator, None
        shut_down(iterator)
        if self._loader_state is not None:
            self._loader_state.restore()
            self._loader_state = None

    def close(self) -> None:
        """End the pass over the loader: its worker processes stop, and a loader iterated
        in place is put back as it was. Called by the engine."""
        self._end_pass()

    def split(self, raw: Any) -> Batch:
        """``raw`` split as every batch of this check is (see
        :mod:`torchdoctor.preflight.batch`)."""
        return split_batch(raw, self.loss_fn, self.runner)

    @functools.cached_property
    def batch_as_given(self) -> Batch:
        """The first batch split into inputs and targets, on its own device (floating-point
        inputs cast to a low- or double-precision model's dtype; a step's targets are those
        its loss call received)."""
        batch = self.split(self.raw_batch)
        if self.runner is not None:
            from torchdoctor.preflight.batch import step_targets
            from torchdoctor.preflight.step import check_whole_batch

            check_whole_batch(self.runner, self.model, self.raw_batch)
            return step_targets(self.model, batch, self.seed)
        dtype = model_dtype(self.model)
        if dtype is None:
            return batch
        cast = move_to(batch.inputs, None, dtype)
        return Batch(cast, batch.targets, batch.style, batch.extra)

    @functools.cached_property
    def batch(self) -> Batch:
        """The first batch split into inputs and targets, on :attr:`device`.

        Raises:
            UsageError: the device cannot take tensors (no CUDA on this machine, say).
        """
        try:
            return self.batch_as_given.to(self.device)
        except (RuntimeError, AssertionError) as error:  # torch's "not compiled with CUDA"
            raise UsageError(f"cannot move the batch to {self.device}: {error}") from None

    @functools.cached_property
    def batch_is_finite(self) -> bool:
        """Whether every floating-point value of the first batch is finite.

        When it is not, TD401 names the values, and the probes whose symptoms they cause
        (a NaN loss, NaN gradients, a model that cannot fit) stay quiet.
        """
        import torch

        batch = self.batch_as_given
        return all(
            bool(torch.isfinite(t).all())
            for _, t in (
                *iter_tensors(batch.inputs, "inputs"),
                *iter_tensors(batch.targets, "targets"),
            )
            if t.is_floating_point() or t.is_complex()
        )

    # --- the loss -----------------------------------------------------------------------

    @functools.cached_property
    def loss_spec(self) -> LossSpec:
        """The loss as recognised from the object, or from the functional it called."""
        static = recognise_loss(self.loss_fn)
        if static.kind is not LossKind.OTHER:
            return static
        try:
            call = self.train_pass.loss_call
        except Exception:  # noqa: BLE001 - the kind is a hint; probes handle the failure
            return static
        return call.spec if call is not None else static

    @property
    def loss_kind(self) -> LossKind:
        """Shortcut for ``loss_spec.kind``."""
        return self.loss_spec.kind

    @functools.cached_property
    def num_classes(self) -> int | None:
        """Classes the model predicts, for cross-entropy and NLL losses; else ``None``."""
        if not self.loss_kind.classifies:
            return None
        scores = self.train_pass.loss_input
        if scores is None or scores.dim() == 0:
            return None
        return int(scores.shape[1] if scores.dim() >= 2 else scores.shape[0])

    # --- shared passes ------------------------------------------------------------------

    @functools.cached_property
    def train_pass(self) -> TrainPass:
        """One seeded forward, loss and backward on the model in training mode.

        Raises:
            SharedWorkFailed: the forward failed for a reason a rule explains.
            UserCodeError: the forward raised for any other reason.
        """
        return run_train_pass(self)

    @functools.cached_property
    def eval_output(self) -> Any:
        """The model's output in eval mode, without gradients (detached)."""
        return self.forward(self.model, train=False, grad=False)

    def forward(
        self, model: Any, batch: Batch | None = None, *, train: bool = True, grad: bool = True
    ) -> Any:
        """Run ``model`` on ``batch`` (default: the first batch), seeded, in a given mode.

        The mode of ``model`` is left as set here; the engine restores the user's model
        after every probe.
        """
        import torch

        batch = batch or self.batch
        model.train(train)
        torch.manual_seed(self.seed)
        with torch.set_grad_enabled(grad):
            return call_user("the model's forward", batch.call, model)
