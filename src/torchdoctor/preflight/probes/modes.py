"""Train/eval mode: an eval-mode forward that is not deterministic (TD504) and BatchNorm
fed batches of one example in training mode, now or at the end of every epoch (TD503).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from torchdoctor._kernel import Reporter
from torchdoctor.errors import UserCodeError
from torchdoctor.findings import Depth, Finding, Location, Severity
from torchdoctor.preflight.batch import iter_tensors
from torchdoctor.preflight.failures import call_user
from torchdoctor.preflight.randomness import RandomCall, record_random_calls
from torchdoctor.preflight.registry import probe
from torchdoctor.rules.registry import finding

if TYPE_CHECKING:
    from torchdoctor.preflight.context import CheckContext

# Two eval forwards count as equal within this relative tolerance: non-deterministic GPU
# kernels differ in the last bits; dropout changes values by tens of percent.
RELATIVE_TOLERANCE = 1e-5
BATCHNORM_ONE = "Expected more than 1 value per channel when training"


# --- TD504: eval-mode forward not deterministic ---------------------------------------------


def largest_difference(first: Any, second: Any) -> float:
    """Largest absolute difference between the tensors of two outputs, relative to the
    largest magnitude (0.0 when equal; inf when their structure differs)."""
    import torch

    pairs = list(zip(iter_tensors(first, "out"), iter_tensors(second, "out"), strict=False))
    if len(pairs) != len(list(iter_tensors(first, "out"))):
        return float("inf")
    worst = 0.0
    for (_, a), (_, b) in pairs:
        if a.shape != b.shape:
            return float("inf")
        if not (a.is_floating_point() or a.is_complex()):
            worst = max(worst, 0.0 if torch.equal(a, b) else float("inf"))
            continue
        scale = float(a.detach().abs().max()) if a.numel() else 0.0
        scale = scale if scale > 0.0 and scale == scale else 1.0  # zeros or NaN: absolute
        diff = (a.detach() - b.detach()).abs()
        worst = max(worst, float(diff.nan_to_num(nan=0.0).max()) / scale if diff.numel() else 0.0)
    return worst


@probe("TD504")
def eval_forward_nondeterministic(ctx: CheckContext, out: Reporter) -> None:
    """Run the eval forward twice with different seeds; name the random ops that differ."""
    import torch

    first = ctx.eval_output
    ctx.model.eval()
    torch.manual_seed(ctx.seed + 1)  # another seed: dropout left on draws another mask
    with torch.no_grad():
        second = call_user("the model's forward", ctx.batch.call, ctx.model)
    difference = largest_difference(first, second)
    if difference <= RELATIVE_TOLERANCE:
        return
    calls = record_random_calls(ctx)
    sites = _sites(calls)
    if not sites:
        out.emit(_unexplained(ctx, difference))
        return
    for call in sites:
        out.emit(_random_site(ctx, call, difference))


def _sites(calls: list[RandomCall]) -> list[RandomCall]:
    """One call per place, in call order."""
    seen: set[tuple[str | None, int | None, str]] = set()
    sites = []
    for call in calls:
        key = (call.path, call.line, call.module)
        if key not in seen:
            seen.add(key)
            sites.append(call)
    return sites


def _random_site(ctx: CheckContext, call: RandomCall, difference: float) -> Finding:
    module = ctx.name(call.module)
    still_training = [
        name for name, m in ctx.model.named_modules() if name == call.module and m.training
    ]
    message = (
        f"In eval mode, `{module}` calls `{call.description}`: two eval "
        f"forwards of the same batch differ by up to {difference:.3g} (relative)."
    )
    if still_training:
        message += f" `{module}` is still in training mode after `model.eval()`."
    if still_training:
        hint = (
            f"Let `model.eval()` reach `{module}`: an override of `train()`, or code "
            "that sets `.training = True`, keeps it in training mode."
        )
    elif call.dropout:
        hint = (
            "Pass `training=self.training` to the functional dropout, or use an "
            "`nn.Dropout` module, which follows `model.eval()`."
        )
    else:
        hint = (
            "Draw random numbers only when `self.training` is True, or make sampling "
            "an explicit argument of `forward`."
        )
    return finding(
        "TD504",
        message,
        Location(path=call.path, line=call.line, object=module, snippet=call.snippet),
        Depth.CHECK,
        fix_hint=hint,
        severity=None if call.dropout else Severity.WARNING,
        evidence={"relative_difference": difference, "op": call.op},
    )


def _unexplained(ctx: CheckContext, difference: float) -> Finding:
    return finding(
        "TD504",
        f"Two eval-mode forwards of the same batch differ by up to {difference:.3g} "
        "(relative), and no PyTorch random op ran: the forward draws from numpy or "
        "`random`, or changes state it reads (a counter, a cache).",
        Location(object=ctx.name("")),
        Depth.CHECK,
        severity=Severity.WARNING,
        fix_hint="Make the eval forward a pure function of its input: draw random numbers "
        "only in training mode and keep mutable state in buffers updated in "
        "training only.",
        evidence={"relative_difference": difference},
    )


# --- TD503: BatchNorm fed a batch of one ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class NormInput:
    """What one BatchNorm layer received in a training-mode forward."""

    module: str
    kind: str
    shape: tuple[int, ...]
    training: bool

    @property
    def raises_on_one(self) -> bool:
        """Whether a batch of one leaves one value per channel (BatchNorm raises then)."""
        values = 1
        for size in self.shape[2:]:
            values *= size
        return values == 1


def _norm_inputs(ctx: CheckContext) -> tuple[list[NormInput], str | None]:
    """BatchNorm inputs in one training-mode forward, and the error it raised, if any."""
    import torch

    seen: list[NormInput] = []
    handles = []
    for name, module in ctx.model.named_modules():
        if isinstance(module, torch.nn.modules.batchnorm._BatchNorm):

            def record(module: Any, args: Any, name: str = name) -> None:
                if args and isinstance(args[0], torch.Tensor) and args[0].dim() >= 2:
                    seen.append(
                        NormInput(
                            name, type(module).__name__, tuple(args[0].shape), module.training
                        )
                    )

            handles.append(module.register_forward_pre_hook(record))
    if not handles:
        return [], None
    try:
        ctx.forward(ctx.model, train=True, grad=False)
    except UserCodeError as error:
        if BATCHNORM_ONE not in str(error):
            raise
        return seen, str(error.original or error)
    finally:
        for handle in handles:
            handle.remove()
    return seen, None


def final_batch_size(loader: Any) -> int | None:
    """Examples in a loader's last batch when it is incomplete and kept; else ``None``."""
    batch_size = getattr(loader, "batch_size", None)
    if not batch_size or getattr(loader, "drop_last", True):
        return None
    try:
        samples = len(loader.sampler)
    except TypeError:  # an iterable dataset or a sampler without a length
        return None
    last = samples % batch_size
    return last or None


def _batch_examples(ctx: CheckContext) -> int | None:
    for _, tensor in iter_tensors(ctx.batch_as_given.inputs, "inputs"):
        if tensor.dim() >= 1:
            return int(tensor.shape[0])
    return None


@probe("TD503")
def batchnorm_batch_of_one(ctx: CheckContext, out: Reporter) -> None:
    """BatchNorm layers in training mode that see one example: in this batch, or in the
    loader's last batch of every epoch."""
    inputs, error = _norm_inputs(ctx)
    training = [seen for seen in inputs if seen.training]
    reported: set[str] = set()
    for seen in training:
        if seen.shape[0] == 1 and seen.module not in reported:
            reported.add(seen.module)
            out.emit(_one_now(ctx, seen, error))
    last = final_batch_size(ctx.loader) if ctx.loader is not None else None
    examples = _batch_examples(ctx)
    if last != 1 or examples is None or examples == 1:
        return
    affected = [seen for seen in training if seen.shape[0] == examples]
    if affected:
        out.emit(_one_at_epoch_end(ctx, affected[0], examples))


def _one_now(ctx: CheckContext, seen: NormInput, error: str | None) -> Finding:
    effect = (
        f"it raised `ValueError: {BATCHNORM_ONE}`"
        if error is not None
        else "it normalises that example with its own statistics and feeds them into the "
        "running averages used in eval mode"
    )
    return finding(
        "TD503",
        f"`{ctx.name(seen.module)}` ({seen.kind}) receives a batch of one example "
        f"in training mode (input {list(seen.shape)}): {effect}.",
        Location(object=ctx.name(seen.module)),
        Depth.CHECK,
        fix_hint="Train with batches of at least 2 examples (16 or more for stable "
        "statistics), or use `nn.GroupNorm` / `nn.LayerNorm`, which do not depend "
        "on the batch.",
        evidence={"input_shape": list(seen.shape), "raised": error is not None},
    )


def _one_at_epoch_end(ctx: CheckContext, seen: NormInput, examples: int) -> Finding:
    loader: Any = ctx.loader
    samples = len(loader.sampler)
    effect = (
        f"raises `ValueError: {BATCHNORM_ONE}` on it, after the whole epoch's work"
        if seen.raises_on_one
        else "normalises that example with its own statistics, in every epoch"
    )
    return finding(
        "TD503",
        f"The DataLoader's last batch holds 1 example ({samples} samples, "
        f"batch_size={loader.batch_size}, drop_last=False), and `{ctx.name(seen.module)}` "
        f"({seen.kind}) sees the batch dimension (input {list(seen.shape)}): it {effect}.",
        Location(object="DataLoader"),
        Depth.CHECK,
        fix_hint="Pass `drop_last=True` to the training DataLoader (or change the batch "
        "size so that the last batch is not a single example).",
        evidence={
            "samples": samples,
            "batch_size": loader.batch_size,
            "module": seen.module,
            "input_shape": list(seen.shape),
        },
    )
