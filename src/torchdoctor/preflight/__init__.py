"""``check``: the pre-flight health check of a model, a batch, a loss and an optimizer.

Call :func:`check` from Python, or ``torchdoctor check TARGET`` from a shell, where
``TARGET`` is ``pkg.module:factory`` or ``path/to/file.py:factory`` (the factory name
defaults to ``make``). The factory takes no arguments and returns what :func:`check`
takes, as either

* a tuple ``(model, data, loss_fn)`` or ``(model, data, loss_fn, optimizer)``, or
* a dict with keys ``model``, ``data`` and optionally ``loss_fn``, ``optimizer``,
  ``step`` (the training step, below) and ``device`` (where training puts the batches,
  e.g. ``"cuda"``).

``data`` is one batch or a DataLoader (any iterable of batches, a list of batches
included: the first batch is used). How a batch trains the model:

* **your step**: ``step(model, batch)`` returns the loss, or ``(loss, outputs)``; it is
  the function your loop already calls (Lightning's ``training_step`` shape), without
  ``backward`` or ``optimizer.step()``. The batch goes to it whole, whatever its shape;
  ``check`` runs it on copies and watches the forward's output and the loss call (its
  inputs and targets) through hooks.
* **a model that computes its own loss**: without ``loss_fn`` and ``step``, a dict batch
  goes whole to ``model(**batch)``, whose output has a ``loss`` (Hugging Face style).
* **split batches**, with ``loss_fn``: ``(inputs, targets)`` (the model is called as
  ``model(inputs)``; as ``model(*inputs)`` when ``inputs`` is a tuple or list; as
  ``model(**inputs)`` when it is a dict), ``(input_1, ..., input_k, targets)``, or a dict
  whose targets are under ``targets``, ``target``, ``labels``, ``label`` or ``y``;
  ``loss_fn(output, targets)`` returns the loss. Elements beyond those go to the loss when
  it requires them: ``(x, y, weight)`` with ``loss_fn(output, y, weight)``, CTC's
  ``(images, targets, input_lengths, target_lengths)`` with ``nn.CTCLoss()``.

Floating-point inputs are cast to the model's dtype when it is bfloat16, float16 or
float64 throughout. When a batch fits none of these, the error names its structure and
the ``step=`` to pass. The debugging lab's ``make()`` functions follow this contract.

The check leaves the user's objects exactly as it found them: parameters and buffers,
``requires_grad`` flags, ``.grad``, train/eval modes, the modules' plain attributes (a
temperature a forward anneals), hooks (a probe's trace hooks never stay behind), optimizer
state, tensors the optimizer trains outside the model, the RNGs of torch, CUDA, numpy and
:mod:`random`, and torch's grad and anomaly modes, backend flags and thread count are
restored bitwise, whether it returns or raises. Batches come from a replay of a
DataLoader, so its sampler and generators are not advanced and no worker outlives the
check. Everything that trains works on copies. This package imports torch;
``import torchdoctor`` does not import it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from torchdoctor._torch import require_torch
from torchdoctor.errors import UsageError
from torchdoctor.findings import Report
from torchdoctor.rules.selection import Selection

__all__ = ["check"]


def check(
    model: Any,
    data: Any,
    loss_fn: Callable[..., Any] | None = None,
    optimizer: Any | None = None,
    *,
    step: Callable[[Any, Any], Any] | None = None,
    device: Any | None = None,
    select: Iterable[str] | None = None,
    ignore: Iterable[str] | None = None,
    seed: int = 0,
    forecast: Any | None = None,
    probes: Iterable[Any] = (),
    timeout: float | None = 60.0,
) -> Report:
    """Pre-flight a training setup and report what is wired wrong.

    Args:
        model: the ``torch.nn.Module`` to train.
        data: one batch (see the module doc for accepted shapes) or a DataLoader.
        loss_fn: ``loss_fn(output, targets) -> loss``: an ``nn`` loss module, a
            functional such as ``F.cross_entropy``, a ``functools.partial`` or any callable;
            ``None`` with ``step``, or for a model that returns its own ``loss``.
        optimizer: the optimizer that will train ``model``, if already built.
        step: your training step, ``step(model, batch) -> loss`` or ``(loss, outputs)``
            (forward and loss; no ``backward``): the whole batch goes to it, so any batch
            shape works. Example::

                def train_step(model, batch):
                    out = model(batch["input_ids"], mask=batch["attention_mask"])
                    return F.cross_entropy(out.flatten(0, 1), batch["labels"].flatten())

                torchdoctor.check(model, loader, optimizer=opt, step=train_step)

        device: where training sends the batches (``"cuda"``); default: the device of the
            model's parameters.
        select: rule codes or prefixes to report (``["TD2", "TD301"]``); default all.
        ignore: rule codes or prefixes not to report; the longest match wins.
        seed: seed for every random draw of the check, so two runs agree.
        forecast: a :class:`~torchdoctor.preflight.forecast.ForecastOptions` to add the
            peak-memory forecast (``facts["forecast"]``); the model summary
            (``facts["summary"]``) is always added.
        probes: your own probes, instances of :class:`torchdoctor.custom.Probe`, run
            after the built-in ones; their findings join the report.
        timeout: wall-clock seconds each probe may take (``None`` or 0: no limit); a probe
            past it ends the check with a :class:`UserCodeError` naming what it waited for.

    Returns:
        A :class:`~torchdoctor.findings.Report` of ``check`` findings, with run facts
        (timings, device, batch shapes).

    Raises:
        UsageError: the arguments cannot be checked (not a module, a batch of an unknown
            shape, parameters on the meta device), or a probe is not a
            :class:`torchdoctor.custom.Probe` declaring its rules.
        UserCodeError: the user's forward, loss or data loader raised for a reason no
            rule explains, or memory ran out.
        TorchMissingError: PyTorch is not installed.
    """
    torch = require_torch("torchdoctor check")
    import torchdoctor.preflight.probes  # noqa: F401 - registers the probes
    from torchdoctor.preflight.context import CheckContext
    from torchdoctor.preflight.engine import run_probes, user_probes
    from torchdoctor.preflight.registry import registered_probes

    extra = user_probes(probes)
    _validate(torch, model, loss_fn, optimizer, step)
    from torchdoctor.preflight.memory_facts import memory_only_report, on_meta_device

    if forecast is not None and on_meta_device(model):
        return memory_only_report(
            CheckContext(
                model,
                data,
                loss_fn,
                optimizer,
                device=device,
                selection=Selection.from_options(select, ignore),
                seed=seed,
                step=step,
            ),
            forecast,
        )
    context = CheckContext(
        model,
        data,
        loss_fn,
        optimizer,
        device=device,
        selection=Selection.from_options(select, ignore),
        seed=seed,
        step=step,
    )
    context.forecast_options = forecast
    from torchdoctor.preflight.budget import probe_timeout

    with probe_timeout(timeout):
        report = run_probes(context, [*registered_probes(), *extra])
    from torchdoctor.preflight.memory_facts import add_memory_facts

    add_memory_facts(report, context, forecast)
    return report


def _validate(torch: Any, model: Any, loss_fn: Any, optimizer: Any, step: Any) -> None:
    if not isinstance(model, torch.nn.Module):
        raise UsageError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    lazy = [
        name
        for name, tensor in (*model.named_parameters(), *model.named_buffers())
        if torch.nn.parameter.is_lazy(tensor)
    ]
    if lazy:
        raise UsageError(
            f"`{lazy[0]}` is an uninitialised parameter of a lazy module ({len(lazy)} in all), "
            "so its shape is not known yet; run one forward first (`model(inputs)`) to "
            "materialise it, as the first training step would, then check"
        )
    if step is not None and not callable(step):
        raise UsageError(f"step must be callable, got {type(step).__name__}")
    if step is not None and loss_fn is not None:
        raise UsageError(
            "pass either step (which computes the loss) or loss_fn, not both; "
            "a step calls its loss itself"
        )
    if loss_fn is not None and not callable(loss_fn):
        raise UsageError(f"loss_fn must be callable, got {type(loss_fn).__name__}")
    if optimizer is not None and not isinstance(optimizer, torch.optim.Optimizer):
        raise UsageError(
            f"optimizer must be a torch.optim.Optimizer or None, got {type(optimizer).__name__}"
        )
