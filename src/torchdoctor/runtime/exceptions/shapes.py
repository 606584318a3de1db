"""Details of shape errors: which layer expected what, and what it received.

Each function reads the numbers out of torch's message (and, where it helps, out of the
running module's own attributes) and says them in the user's terms.
"""

from __future__ import annotations

from typing import Any

from torchdoctor.runtime.exceptions.facts import Detail, ErrorFacts

__all__ = [
    "batch_size_mismatch",
    "broadcast_mismatch",
    "concat_mismatch",
    "conv_channels",
    "conv_rank",
    "hidden_size",
    "input_too_small",
    "linear_features",
    "loss_target_shape",
    "norm_features",
    "one_value_per_channel",
    "sequence_features",
    "view_size",
]

# Losses that compare an output with a target of the same shape.
_ELEMENTWISE_LOSSES = (
    "mse_loss",
    "l1_loss",
    "smooth_l1_loss",
    "huber_loss",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "soft_margin_loss",
    "kl_div",
    "poisson_nll_loss",
    "gaussian_nll_loss",
)


def _dims(text: str) -> list[int]:
    return [int(part) for part in text.replace(" ", "").split(",") if part.lstrip("-").isdigit()]


def _named(facts: ErrorFacts) -> str:
    return facts.module.described if facts.module else "a layer"


def _attr(facts: ErrorFacts, name: str) -> Any:
    return getattr(facts.module.module, name, None) if facts.module else None


def linear_features(facts: ErrorFacts) -> Detail:
    """``mat1 and mat2 shapes cannot be multiplied (4x8 and 16x2)``."""
    got, expected, out = int(facts.group("k1")), int(facts.group("k2")), int(facts.group("n"))
    evidence = {"expected_features": expected, "got_features": got, "rows": int(facts.group("m"))}
    fixes: tuple[str, ...]
    if facts.module and facts.module.type_name in {"Linear", "LazyLinear", "Bilinear"}:
        out = _attr(facts, "out_features") or out
        summary = f"{_named(facts)} expects {expected} input features but received {got}"
        fixes = (
            f"Build `{facts.module.label}` as `nn.Linear({got}, {out})`, or change the layer "
            f"before it so it outputs {expected} features.",
            "If the size comes from flattening a feature map, compute it from the real "
            f"input resolution, or use `nn.LazyLinear({out})` to infer it.",
        )
    else:
        summary = (
            f"a matrix product got operands of {facts.group('m')}x{got} and "
            f"{expected}x{out}: the inner sizes {got} and {expected} differ"
        )
        fixes = (
            "Print the two operands' shapes just before the failing line and transpose or "
            "reshape the one whose last dimension is wrong.",
        )
    return Detail(summary, fixes, evidence)


def conv_channels(facts: ErrorFacts) -> Detail:
    """``Given groups=1, weight of size [...], expected input[...] to have 3 channels, ...``."""
    expected, got = int(facts.group("expected")), int(facts.group("got"))
    shape = _dims(facts.group("input"))
    summary = (
        f"{_named(facts)} expects {expected} input channels but received {got} "
        f"(input shape {shape})"
    )
    fixes = [f"Give the layer `in_channels={got}`, or feed it {expected}-channel input."]
    if len(shape) >= 3 and shape[-1] == expected:
        fixes.insert(
            0,
            "The batch looks channels-last ([N, H, W, C]): permute it with "
            "`x.permute(0, 3, 1, 2)` before the model.",
        )
    elif got == 1 and expected == 3:
        fixes.append(
            "For grayscale images, repeat the channel (`x.expand(-1, 3, -1, -1)`) or "
            "convert them to RGB in the transform."
        )
    return Detail(
        summary,
        tuple(fixes),
        {"expected_channels": expected, "got_channels": got, "input_shape": shape},
    )


def conv_rank(facts: ErrorFacts) -> Detail:
    """``Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of size: [...]``."""
    shape = _dims(facts.group("input"))
    batched = int(facts.group("batched"))
    summary = (
        f"{_named(facts)} needs a {batched}-D batch ({facts.group('op')}: "
        f"[N, C, ...spatial]) but received a {len(shape)}-D tensor of shape {shape}"
    )
    fixes = (
        "Reshape flat inputs to images before the convolution (for 28x28 grayscale: "
        "`x.view(-1, 1, 28, 28)`), or check that the DataLoader yields the tensor you "
        "expect (not a flattened or squeezed one).",
    )
    return Detail(summary, fixes, {"input_shape": shape, "expected_rank": batched})


def norm_features(facts: ErrorFacts) -> Detail:
    """BatchNorm's ``running_mean should contain`` and LayerNorm's ``normalized_shape``."""
    if facts.group("normalized"):
        expected, shape = _dims(facts.group("normalized")), _dims(facts.group("input"))
        summary = (
            f"{_named(facts)} normalises over the last dimensions {expected} but "
            f"received input of shape {shape}"
        )
        fixes = (
            f"Build the LayerNorm with `normalized_shape={shape[-len(expected) :]}` or "
            "feed it features whose trailing size matches.",
        )
        return Detail(summary, fixes, {"normalized_shape": expected, "input_shape": shape})
    channels, features = int(facts.group("got")), int(facts.group("expected"))
    summary = (
        f"{_named(facts)} has {features} features but its input has {channels} channels "
        "(dimension 1)"
    )
    fixes = (
        f"Build it with `num_features={channels}`, or check that dimension 1 of its input "
        "is the channel dimension (BatchNorm1d on [N, L, C] sequences needs a transpose).",
    )
    return Detail(summary, fixes, {"num_features": features, "input_channels": channels})


def broadcast_mismatch(facts: ErrorFacts) -> Detail:
    """``The size of tensor a (8) must match the size of tensor b (3) at non-singleton ...``."""
    a, b, dim = int(facts.group("a")), int(facts.group("b")), int(facts.group("dim"))
    evidence = {"size_a": a, "size_b": b, "dimension": dim}
    loss = facts.frame_named(*_ELEMENTWISE_LOSSES)
    if loss is not None:
        shapes = _shapes_of(loss, "input", "target")
        summary = (
            f"`{loss.function}` received an output and a target that cannot be "
            f"broadcast together ({shapes or f'{a} vs {b} at dimension {dim}'})"
        )
        fixes = (
            "Make the output and target the same shape before the loss (for example "
            "`output.squeeze(-1)` for a [N, 1] output, or one-hot / reshape the target).",
        )
        return Detail(summary, fixes, evidence, code="TD306")
    summary = (
        f"an elementwise operation combined tensors of sizes {a} and {b} at "
        f"dimension {dim}, which cannot be broadcast"
    )
    fixes = (
        "Print both operands' shapes before the failing line; reshape or `unsqueeze` one "
        "of them so the sizes agree or are 1.",
    )
    return Detail(summary, fixes, evidence)


def _shapes_of(frame: Any, *names: str) -> str:
    shapes = []
    for name in names:
        value = frame.local(name)
        shape = getattr(value, "shape", None)
        if shape is not None:
            shapes.append(f"{name} {list(shape)}")
    return ", ".join(shapes)


def view_size(facts: ErrorFacts) -> Detail:
    """``shape '[3, -1]' is invalid for input of size 32``."""
    shape, size = _dims(facts.group("shape")), int(facts.group("size"))
    summary = f"a view/reshape to {shape} cannot hold the {size} elements of its input"
    fixes = (
        "Do not hard-code the batch size in `view`/`reshape`: use `x.view(x.size(0), -1)` "
        "or `x.flatten(1)`; the last batch of an epoch is usually smaller "
        "(or pass `drop_last=True` to the DataLoader).",
    )
    return Detail(summary, fixes, {"target_shape": shape, "elements": size})


def concat_mismatch(facts: ErrorFacts) -> Detail:
    """``Sizes of tensors must match except in dimension 1. Expected size 4 but got 3 ...``."""
    dim, expected, got = facts.group("dim"), int(facts.group("expected")), int(facts.group("got"))
    summary = (
        f"`torch.cat`/`torch.stack` got tensors whose sizes differ outside dimension "
        f"{dim}: {expected} vs {got} (tensor number {facts.group('index')})"
    )
    fixes = (
        "Make every tensor the same size in all dimensions but the one you concatenate "
        "along (pad, crop or project them first).",
    )
    return Detail(summary, fixes, {"expected": expected, "got": got})


def batch_size_mismatch(facts: ErrorFacts) -> Detail:
    """``Expected input batch_size (4) to match target batch_size (3).``."""
    out, target = int(facts.group("input")), int(facts.group("target"))
    summary = f"the loss received {out} output rows but {target} targets"
    fixes = (
        "Pass the output and the targets of the same batch; for sequence models flatten "
        "both the same way (`logits.view(-1, C)` with `targets.view(-1)`).",
    )
    return Detail(summary, fixes, {"output_rows": out, "targets": target})


def loss_target_shape(facts: ErrorFacts) -> Detail:
    """Target shape errors of ``cross_entropy`` and of the binary cross-entropy losses."""
    target, output = _dims(facts.group("target")), _dims(facts.group("input"))
    summary = f"the loss received output of shape {output} and a target of shape {target}"
    fixes: tuple[str, ...]
    if facts.group("bce"):
        fixes = (
            "Give output and target the same shape: `output.squeeze(1)` for a [N, 1] "
            "output, or `target.unsqueeze(1).float()`.",
        )
    else:
        fixes = (
            "For class-index targets the output is [N, C, ...] and the target [N, ...]: "
            "move the class dimension to position 1 (`logits.permute(0, 2, 1)`) or flatten "
            "both (`logits.view(-1, C)`, `target.view(-1)`).",
        )
    return Detail(summary, fixes, {"output_shape": output, "target_shape": target})


def sequence_features(facts: ErrorFacts) -> Detail:
    """RNN ``input.size(-1) must be equal to input_size`` and attention embedding sizes."""
    expected, got = int(facts.group("expected")), int(facts.group("got"))
    summary = f"{_named(facts)} expects {expected} features per time step but received {got}"
    fixes = (
        f"Build the layer with {got} input features, or project the input to {expected} "
        "first; with `batch_first=False` the input is [T, N, F].",
    )
    return Detail(summary, fixes, {"expected_features": expected, "got_features": got})


def hidden_size(facts: ErrorFacts) -> Detail:
    """RNN ``Expected hidden size (1, 8, 64), got [1, 4, 64]``."""
    expected, got = _dims(facts.group("expected")), _dims(facts.group("got"))
    summary = f"{_named(facts)} received a hidden state of shape {got}; it needs {expected}"
    fixes = (
        "Create the initial hidden state for each batch from the batch's own size, or "
        "pass `drop_last=True` so no smaller last batch meets a carried-over state.",
    )
    return Detail(summary, fixes, {"expected_hidden": expected, "got_hidden": got})


def input_too_small(facts: ErrorFacts) -> Detail:
    """Convolution or pooling on a feature map smaller than its kernel."""
    summary = (
        f"{_named(facts)} received a feature map smaller than its kernel "
        f"({facts.group('detail').strip()})"
    )
    fixes = (
        "Feed larger inputs (resize in the transform), or use fewer downsampling layers / "
        "padding; each stride-2 layer halves the spatial size.",
    )
    return Detail(summary, fixes, {})


def one_value_per_channel(facts: ErrorFacts) -> Detail:
    """``Expected more than 1 value per channel when training``."""
    summary = (
        f"{_named(facts)} in training mode received a batch with one value per "
        f"channel (input {facts.group('shape')}); batch statistics need at least two"
    )
    fixes = (
        "Pass `drop_last=True` to the training DataLoader so no batch of one remains, "
        "or call `model.eval()` for single-example inference.",
    )
    return Detail(summary, fixes, {"input_size": facts.group("shape")})
