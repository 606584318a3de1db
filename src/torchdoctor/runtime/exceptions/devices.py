"""Details of device and dtype errors: which tensors disagree, and where the model lives."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from torchdoctor.runtime.exceptions.facts import DEVICE_MISMATCH_CODE, Detail, ErrorFacts

__all__ = [
    "device_mismatch",
    "dtype_mismatch",
    "input_weight_type",
    "meta_data_access",
    "target_dtype",
]

# Legacy type names in messages ("torch.cuda.HalfTensor") -> (device, dtype).
_LEGACY_DTYPES = {
    "Float": "float32",
    "Double": "float64",
    "Half": "float16",
    "BFloat16": "bfloat16",
    "Long": "int64",
    "Int": "int32",
    "Byte": "uint8",
    "Bool": "bool",
}
_DTYPE_WORDS = {
    "float": "float32",
    "double": "float64",
    "half": "float16",
    "c10::half": "float16",
    "bfloat16": "bfloat16",
    "c10::bfloat16": "bfloat16",
    "long": "int64",
    "int": "int32",
    **{k.lower(): v for k, v in _LEGACY_DTYPES.items()},
}


# Losses whose target must be floating; a dtype error raised inside one is about the target.
_LOSSES = (
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "mse_loss",
    "l1_loss",
    "smooth_l1_loss",
    "huber_loss",
    "kl_div",
    "soft_margin_loss",
    "multilabel_soft_margin_loss",
    "poisson_nll_loss",
    "gaussian_nll_loss",
)


def _dtype(word: str) -> str:
    return _DTYPE_WORDS.get(word.strip().lower(), word.strip())


def _parameter_places(models: Iterable[Any], attribute: str) -> dict[str, list[str]]:
    """``{"meta": ["head.weight", ...], "cpu": [...]}`` over parameters and buffers."""
    places: dict[str, list[str]] = {}
    for model in models:
        try:
            tensors = [*model.named_parameters(), *model.named_buffers()]
        except Exception:  # noqa: BLE001 - a broken user module must not break the report
            continue
        for name, tensor in tensors:
            places.setdefault(str(getattr(tensor, attribute, "?")), []).append(name)
    return places


def _models(facts: ErrorFacts) -> list[Any]:
    if facts.models:
        return list(facts.models)
    return [facts.module.module] if facts.module else []


def _describe_places(places: dict[str, list[str]]) -> str:
    parts = []
    for place, names in sorted(places.items(), key=lambda item: -len(item[1])):
        shown = ", ".join(f"`{n}`" for n in names[:3]) + (" ..." if len(names) > 3 else "")
        parts.append(f"{len(names)} on {place} ({shown})")
    return "; ".join(parts)


def device_mismatch(facts: ErrorFacts) -> Detail:
    """``Expected all tensors to be on the same device`` and its older/meta wordings."""
    devices = [d for d in (facts.group("first"), facts.group("second")) if d]
    places = _parameter_places(_models(facts), "device")
    summary = (
        f"{facts.module_label} received tensors on different devices ({' and '.join(devices)})"
    )
    evidence: dict[str, Any] = {"devices": devices}
    if len(places) > 1:
        summary += f"; the model's parameters and buffers are split: {_describe_places(places)}"
        evidence["parameter_devices"] = {k: len(v) for k, v in places.items()}
    if "meta" in devices or "meta" in places:
        fixes = (
            "Materialise a model built on the `meta` device before using it: "
            "`model.to_empty(device=device)` and then load or initialise the weights, or "
            "`model.load_state_dict(state, assign=True)`; loading into meta parameters "
            "without `assign=True` does nothing.",
        )
    else:
        fixes = (
            "Move the model once (`model.to(device)`) and every batch in the loop "
            "(`x, y = x.to(device), y.to(device)`); tensors created inside `forward` need "
            "`device=x.device`, and buffers must be registered with `register_buffer` to "
            "follow `model.to()`.",
        )
    return Detail(summary, fixes, evidence)


def meta_data_access(facts: ErrorFacts) -> Detail:
    """Reading the values of a ``meta`` tensor (``.item()``, ``.cpu()``, printing)."""
    places = _parameter_places(_models(facts), "device")
    summary = "a tensor on the `meta` device (shape only, no data) was read"
    if "meta" in places:
        summary += (
            f"; the model still has meta tensors: {_describe_places({'meta': places['meta']})}"
        )
    fixes = (
        "Materialise the model before training: `model.to_empty(device=device)` and then "
        "load or initialise the weights, or `load_state_dict(state, assign=True)`.",
    )
    return Detail(
        summary, fixes, {"meta_tensors": len(places.get("meta", []))}, code=DEVICE_MISMATCH_CODE
    )


def dtype_mismatch(facts: ErrorFacts) -> Detail:
    """``mat1 and mat2 must have the same dtype`` and friends."""
    loss = facts.frame_named(*_LOSSES)
    target_dtype = getattr(loss.local("target"), "dtype", None) if loss is not None else None
    if loss is not None and target_dtype is not None:
        got = str(target_dtype).removeprefix("torch.")
        summary = f"`{loss.function}` received a target of dtype {got}; it needs a float target"
        fixes = (
            "Convert the target where the dataset builds it: `target.float()` (for BCE "
            "losses with 0/1 labels too).",
        )
        return Detail(summary, fixes, {"loss": loss.function, "target_dtype": got}, code="TD104")
    first, second = _dtype(facts.group("first")), _dtype(facts.group("second"))
    return _dtype_detail(facts, first, second)


def _dtype_detail(facts: ErrorFacts, first: str, second: str) -> Detail:
    places = _parameter_places(_models(facts), "dtype")
    summary = f"{facts.module_label} received tensors of different dtypes ({first} and {second})"
    evidence: dict[str, Any] = {"dtypes": [first, second]}
    if places:
        evidence["parameter_dtypes"] = {k: len(v) for k, v in places.items()}
    fixes: list[str] = []
    if "float64" in (first, second):
        fixes.append(
            "Convert float64 data to float32 where it enters: `x = x.float()`, or "
            "`torch.as_tensor(array, dtype=torch.float32)` (NumPy arrays are float64 "
            "by default)."
        )
    if {"float16", "bfloat16"} & {first, second}:
        fixes.append(
            "For mixed precision keep the model in float32 and wrap the forward pass "
            "in `torch.autocast(device_type, dtype=...)` instead of calling "
            "`.half()`/`.bfloat16()` on some tensors only."
        )
    fixes.append(
        "Give the model and its inputs one dtype: `model.to(dtype)` and "
        "`x.to(dtype)` once, at the boundary."
    )
    return Detail(summary, tuple(fixes), evidence)


def input_weight_type(facts: ErrorFacts) -> Detail:
    """``Input type (X) and weight type (Y) should be the same``: a device or a dtype clash."""
    first, second = facts.group("first"), facts.group("second")
    on_cuda = ["cuda" in first.lower(), "cuda" in second.lower()]
    if on_cuda[0] != on_cuda[1]:
        detail = device_mismatch(facts)
        devices = ["cuda" if flag else "cpu" for flag in on_cuda]
        summary = (
            f"{facts.module_label} received its input on {devices[0]} but its weights "
            f"are on {devices[1]}"
        )
        return Detail(
            summary,
            detail.fixes,
            {**detail.evidence, "devices": devices},
            code=DEVICE_MISMATCH_CODE,
        )
    return _dtype_detail(facts, _legacy(first), _legacy(second))


def _legacy(name: str) -> str:
    """``torch.cuda.HalfTensor`` / ``CUDABFloat16Type`` / ``double`` -> a dtype name."""
    stem = name.split(".")[-1].removesuffix("Tensor").removesuffix("Type")
    stem = stem.removeprefix("CUDA").removeprefix("CPU")
    return _LEGACY_DTYPES.get(stem, _dtype(stem))


def target_dtype(facts: ErrorFacts) -> Detail:
    """Class-index losses given float targets (``expected target dtype to be Long``)."""
    got = _dtype(facts.group("got") or facts.group("second"))
    summary = f"the loss received class-index targets of dtype {got}; class indices must be int64"
    fixes = (
        "Convert the targets with `target.long()`; if they are probabilities or one-hot "
        "rows, give them the output's shape [N, C] as float instead.",
    )
    return Detail(summary, fixes, {"target_dtype": got})
