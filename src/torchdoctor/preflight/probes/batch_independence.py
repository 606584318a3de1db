"""Batch independence (TD508; TD109 for a recurrent layer run along the batch): in eval
mode, one example's output must not depend on the other examples of its batch, nor on how
much padding they bring.

The model runs in eval mode under ``no_grad`` on the first batch and on variants of it
that keep the last example as it is (:mod:`torchdoctor.preflight.independence`): the
other examples replaced by copies of it, and, for right-padded token batches, more
padding. When that example's output changes, :mod:`torchdoctor.preflight.entry` names the
op, the module and the user's line where the examples mix.

Policy for correct models that look like a violation, kept quiet:

* a model that is not deterministic in eval (two seeds give two outputs) is skipped: it is
  TD504's problem, and its noise would pass for a dependence;
* output tensors that are batch by batch by design (CLIP-style similarity logits,
  in-batch negatives: another dimension as long as the batch) are not compared, nor
  outputs without one row per example (a loss, a pooled statistic);
* a batch that links its examples itself (a graph's square adjacency, integer edges
  indexing its rows) is skipped: its examples are nodes, meant to see each other;
* a variant the model cannot run (a longer padded length past its positional table) is
  dropped; tensors that are not laid out by example are left as they are;
* differences up to :func:`~torchdoctor.preflight.independence.tolerance` (1e-4 relative
  in float32) are rounding: the variants keep every kernel's shapes, or only append
  padding, and measure 0.0 on models that keep the invariant.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from torchdoctor.findings import Depth, Finding, Location, Severity
from torchdoctor.preflight.batch import Batch, iter_tensors
from torchdoctor.preflight.entry import Entry, find_entry
from torchdoctor.preflight.independence import (
    Variant,
    difference,
    example_part,
    examples_count,
    others_replaced,
    padding_added,
    relates_examples,
    tolerance,
)
from torchdoctor.preflight.registry import probe
from torchdoctor.rules.registry import finding

if TYPE_CHECKING:
    from torchdoctor.preflight.context import CheckContext

_RESHAPES = frozenset(
    {"view", "reshape", "view_as", "reshape_as", "flatten", "unflatten", "as_strided"}
)
_REDUCTIONS = frozenset(
    {"mean", "sum", "std", "var", "std_mean", "var_mean", "norm", "linalg_vector_norm",
     "max", "min", "amax", "amin", "logsumexp", "softmax", "log_softmax", "cumsum",
     "median", "prod", "nanmean", "nansum", "normalize"}
)  # fmt: skip


@probe("TD508", "TD109")
def eval_output_depends_on_batch(ctx: CheckContext) -> Iterator[Finding]:
    """Compare the last example's eval output across variants of its batch."""
    batch = ctx.batch
    count = examples_count(batch, getattr(ctx.loader, "batch_size", None))
    if count is None or count < 2 or relates_examples(batch, count):
        return
    keep = count - 1
    base = _parts(ctx, batch, ctx.seed, count, keep)
    if not base or not _finite(base):
        return
    tol = tolerance(base[0].dtype)
    again = _parts(ctx, batch, ctx.seed + 1, count, keep)
    if again is None or _change(base, again) > tol:
        return  # random in eval mode (TD504), or state that changes between calls
    for variant in _variants(ctx, batch, count, keep):
        changed = _parts(ctx, variant.batch, ctx.seed, count, keep)
        change = _change(base, changed) if changed is not None else 0.0
        if change <= tol:
            continue
        entry = find_entry(
            ctx.model, lambda b: _forward(ctx, b, ctx.seed), batch, variant.batch, count, keep, tol
        )
        if entry is None or not _by_design(ctx, entry, count):
            yield _finding(ctx, variant, entry, change, count, keep)
        return


def _by_design(ctx: CheckContext, entry: Entry, count: int) -> bool:
    """Examples mixed on purpose: an op over an examples-by-examples tensor (a graph's
    adjacency, in-batch similarities), or attention given the examples as the positions
    of one sequence (``x.unsqueeze(0)``: a set model)."""
    module = _module(ctx, entry.module)
    if _misused_layer(module, entry, count):
        return False
    one_sequence = entry.input_shape[:2] in ((1, count), (count, 1)) or (
        len(entry.input_shape) == 2 and entry.input_shape[0] == count
    )
    return entry.pairwise or ("attention" in entry.op and one_sequence)


def _misused_layer(module: Any, entry: Entry, count: int) -> bool:
    """A layer whose own misuse mixes examples: a BatchNorm on batch statistics, or a
    sequence-first recurrent or attention layer given a batch-first input."""
    import torch

    if isinstance(module, torch.nn.modules.batchnorm._BatchNorm):
        return True
    sequence_first = isinstance(module, torch.nn.RNNBase) or _attention(module)
    shape = entry.input_shape
    return (
        sequence_first
        and not getattr(module, "batch_first", True)
        and len(shape) == 3
        and shape[0] == count
        and shape[1] != 1
    )


def _variants(ctx: CheckContext, batch: Batch, count: int, keep: int) -> Iterator[Variant]:
    yield others_replaced(batch, count, keep)
    padded = padding_added(batch, count, ctx.model)
    if padded is not None:
        yield padded


def _forward(ctx: CheckContext, batch: Batch, seed: int) -> Any:
    import torch

    ctx.model.eval()
    torch.manual_seed(seed)
    with torch.no_grad():
        return batch.call(ctx.model)


def _parts(ctx: CheckContext, batch: Batch, seed: int, count: int, keep: int) -> list[Any] | None:
    """The kept example's part of every floating-point output with one row per example
    (not batch by batch); ``None`` when the forward raised."""
    try:
        output = _forward(ctx, batch, seed)
    except Exception:  # noqa: BLE001 - a variant the model cannot run proves nothing
        return None
    return [
        example_part(tensor, count, keep).detach()
        for _, tensor in iter_tensors(output, "output")
        if (tensor.is_floating_point() or tensor.is_complex())
        and tensor.dim() >= 1
        and tensor.shape[0] == count
        and count not in tuple(tensor.shape[1:])
    ]


def _finite(parts: list[Any]) -> bool:
    import torch

    return all(bool(torch.isfinite(part).all()) for part in parts)


def _change(base: list[Any], other: list[Any]) -> float:
    if len(base) != len(other):
        return 0.0  # another output structure: nothing to pair
    return max(difference(a, b) for a, b in zip(base, other, strict=True))


def _finding(
    ctx: CheckContext, variant: Variant, entry: Entry | None, change: float, count: int, keep: int
) -> Finding:
    what = (
        "at its own positions changes by {change} (relative) when the batch is padded to "
        "a longer length, as when a longer example joins it"
        if variant.padded
        else "changes by {change} (relative) when the other examples of its batch change"
    ).format(change=f"{change:.3g}")
    subject = f"In eval mode, the output of example {keep} (of {count}) {what}"
    code, severity, cause, hint = _cause(ctx, variant, entry)
    location = Location(object=ctx.name(""))
    if entry is not None:
        frame = entry.frame
        location = Location(
            path=frame.filename if frame else None,
            line=frame.lineno if frame else None,
            object=ctx.name(entry.module),
            snippet=(frame.line or None) if frame else None,
        )
    evidence: dict[str, Any] = {
        "relative_change": change,
        "batch_size": count,
        "example": keep,
        "variant": "padding added" if variant.padded else "other examples replaced",
    }
    if entry is not None:
        evidence.update(
            op=entry.op, module=ctx.name(entry.module), input_shape=list(entry.input_shape)
        )
    return finding(
        code,
        f"{subject}: {cause}.",
        location,
        Depth.CHECK,
        fix_hint=hint,
        severity=severity,
        evidence=evidence,
    )


def _cause(
    ctx: CheckContext, variant: Variant, entry: Entry | None
) -> tuple[str, Severity | None, str, str]:
    """``(code, severity or None for the rule's, cause in words, fix hint)``."""
    import torch

    if entry is None:
        return (
            "TD508",
            None,
            "no single op could be pinned (the change comes through state the forward "
            "keeps between calls, or the runs took different paths)",
            "Compute each example's output from that example alone in eval mode.",
        )
    module = _module(ctx, entry.module)
    name, kind = ctx.name(entry.module), type(module).__name__
    shape = list(entry.input_shape)
    if isinstance(module, torch.nn.RNNBase) and not module.batch_first and not variant.padded:
        return (
            "TD109",
            None,
            f"`{name}` ({kind}) is sequence-first (no `batch_first=True`) and is given the "
            f"batch-first input {shape}, so it runs its recurrence along the batch",
            "Build the layer with `batch_first=True` for `(batch, seq, features)` inputs, "
            "or give it `x.transpose(0, 1)` and read its output sequence-first.",
        )
    if isinstance(module, torch.nn.modules.batchnorm._BatchNorm):
        return _batchnorm_cause(name, kind, module)
    if _attention(module) and variant.padded:
        return (
            "TD508",
            None,
            f"`{name}` ({kind}) attends to the padded positions (no padding mask reaches it)",
            "Pass the padding mask to the attention (`src_key_padding_mask=` / "
            "`key_padding_mask=`, True at padded positions, or the `attention_mask`).",
        )
    if _attention(module) and not getattr(module, "batch_first", True):
        return (
            "TD508",
            None,
            f"`{name}` ({kind}) is sequence-first (no `batch_first=True`) and is given the "
            f"batch-first input {shape}, so it attends across the examples of the batch",
            "Build the attention with `batch_first=True` for `(batch, seq, features)` "
            "inputs, or transpose its input to `(seq, batch, features)`.",
        )
    return _op_cause(name, entry.op, variant)


def _module(ctx: CheckContext, path: str) -> Any:
    try:
        return ctx.model.get_submodule(path) if path else ctx.model
    except AttributeError:
        return None


def _attention(module: Any) -> bool:
    import torch

    kinds = (
        torch.nn.MultiheadAttention,
        torch.nn.TransformerEncoderLayer,
        torch.nn.TransformerDecoderLayer,
        torch.nn.TransformerEncoder,
        torch.nn.TransformerDecoder,
    )
    return isinstance(module, kinds)


def _batchnorm_cause(name: str, kind: str, module: Any) -> tuple[str, Severity | None, str, str]:
    if module.training:
        return (
            "TD508",
            None,
            f"`{name}` ({kind}) is still in training mode after `model.eval()`, so it "
            "normalises with the statistics of the batch",
            f"Let `model.eval()` reach `{name}`: an override of `train()`, or code that sets "
            "`.training = True`, keeps it in training mode.",
        )
    return (
        "TD508",
        Severity.WARNING,  # transductive evaluation is sometimes meant
        f"`{name}` ({kind}) has no running statistics (`track_running_stats=False`), so "
        "in eval mode too it normalises with the statistics of the batch",
        "Build it with `track_running_stats=True` (the default) so that evaluation uses "
        "running statistics, or use `nn.GroupNorm` / `nn.LayerNorm`; keep it only if "
        "normalising each test batch by itself is intended.",
    )


def _op_cause(name: str, op: str, variant: Variant) -> tuple[str, Severity | None, str, str]:
    where = f"`{op}` in `{name}`'s forward"
    if variant.padded:
        return (
            "TD508",
            None,
            f"{where} reads the padded positions (a mean, a softmax or attention over the "
            "whole padded length)",
            "Leave padded positions out of every reduction: mask them, and divide pooled "
            "sums by the real lengths (`mask.sum(1)`), not by the padded length.",
        )
    if op in _RESHAPES:
        return (
            "TD508",
            None,
            f"{where} reshapes across the batch dimension, so values of other examples "
            "end up in this example's rows",
            "Keep the batch dimension first and whole: reorder dimensions with "
            "`transpose` / `permute`, then reshape with the batch size first "
            "(`x.reshape(x.size(0), -1)`).",
        )
    if op in _REDUCTIONS:
        return (
            "TD508",
            None,
            f"{where} reduces over the batch dimension (statistics of the batch, such as a "
            "hand-written normalisation)",
            "Reduce over each example's own dimensions (`dim=1` and after), or normalise "
            "with running statistics (`nn.BatchNorm1d`) or per example (`nn.LayerNorm`).",
        )
    return (
        "TD508",
        None,
        f"{where} combines values of different examples",
        "Compute each example's output from that example alone in eval mode.",
    )
