"""The ``ckpt`` detector that needs a model: TD910, keys or shapes that do not fit it."""

from __future__ import annotations

from collections.abc import Iterator

from torchdoctor._kernel import Reporter
from torchdoctor.ckpt.compare import Comparison
from torchdoctor.ckpt.detectors import CheckpointContext, examples
from torchdoctor.findings import Depth, Finding, Severity
from torchdoctor.rules.detectors import detector
from torchdoctor.rules.registry import finding

__all__ = ["checkpoint_model_mismatch"]

CKPT = Depth.CKPT
_MAX_SHAPE_FINDINGS = 10
_REMAP_HINT = (
    "`torchdoctor ckpt FILE --model SPEC --write-remapped OUT` writes a renamed "
    "copy that loads with strict=True"
)


def _where(comparison: Comparison) -> str:
    path = comparison.state_dict_path
    return f"the checkpoint's '{path}' state_dict" if path else "the checkpoint"


@detector("TD910", depth=CKPT)
def checkpoint_model_mismatch(context: CheckpointContext, out: Reporter) -> None:
    """Missing, unexpected, shape- and dtype-mismatched keys against the model."""
    comparison = context.comparison
    if comparison is None:
        return
    if not comparison.loads_strict:
        if comparison.mapping and comparison.loads_after_mapping:
            out.emit(_explained_by_mapping(context, comparison))
        else:
            for item in _key_problems(context, comparison):
                out.emit(item)
            for item in _shape_problems(context, comparison):
                out.emit(item)
    if comparison.dtype_mismatches:
        key, ours, theirs = comparison.dtype_mismatches[0]
        out.emit(
            finding(
                "TD910",
                f"{len(comparison.dtype_mismatches)} tensors of {_where(comparison)} have another "
                f"dtype than {comparison.model_name}'s, e.g. '{key}' is {ours}, the model's "
                f"{theirs}: load_state_dict casts them silently.",
                context.at(key),
                CKPT,
                severity=Severity.INFO,
                fix_hint=f"Convert the model (`model.to(torch.{ours})`) if the checkpoint's "
                "precision is the one you want; otherwise nothing to do.",
                evidence={"tensors": len(comparison.dtype_mismatches)},
            )
        )


def _explained_by_mapping(context: CheckpointContext, comparison: Comparison) -> Finding:
    first = comparison.unexpected[0] if comparison.unexpected else None
    return finding(
        "TD910",
        f"{comparison.model_name} does not load {_where(comparison)} with strict=True "
        f"({len(comparison.missing)} missing, {len(comparison.unexpected)} unexpected keys), "
        f"but every key fits after renaming: {comparison.mapping.describe()}.",
        context.at(first),
        CKPT,
        fix_hint=f"Rename the keys before load_state_dict: {_REMAP_HINT}.",
        evidence={
            "missing": len(comparison.missing),
            "unexpected": len(comparison.unexpected),
            "mapping": comparison.mapping.describe(),
        },
    )


def _key_problems(context: CheckpointContext, comparison: Comparison) -> Iterator[Finding]:
    partial = (
        f" Renaming explains part of it ({comparison.mapping.describe()})."
        if comparison.mapping
        else ""
    )
    missing, unexpected = comparison.remaining_missing, comparison.remaining_unexpected
    if missing:
        yield finding(
            "TD910",
            f"{len(missing)} of {len(comparison.model_keys)} keys of {comparison.model_name} "
            f"are missing from {_where(comparison)}: {examples(missing)}. strict=True loading "
            "fails; strict=False leaves them at their random initial values." + partial,
            context.at(missing[0]),
            CKPT,
            fix_hint="Load the checkpoint of this architecture, or initialise the missing "
            "part on purpose and load with strict=False, checking the returned "
            "missing_keys.",
            evidence={"missing": len(missing)},
        )
    if unexpected:
        yield finding(
            "TD910",
            f"{len(unexpected)} keys of {_where(comparison)} do not exist in "
            f"{comparison.model_name}: {examples(unexpected)}. strict=True loading fails; "
            "strict=False drops their weights." + partial,
            context.at(unexpected[0]),
            CKPT,
            fix_hint="Build the model with the layers the checkpoint was saved from, or drop "
            "those keys deliberately before loading.",
            evidence={"unexpected": len(unexpected)},
        )


def _shape_problems(context: CheckpointContext, comparison: Comparison) -> Iterator[Finding]:
    for key, ours, theirs in comparison.shape_mismatches[:_MAX_SHAPE_FINDINGS]:
        yield finding(
            "TD910",
            f"'{key}' has shape {list(ours)} in {_where(comparison)} but {list(theirs)} in "
            f'{comparison.model_name}: load_state_dict raises "size mismatch", even with '
            "strict=False.",
            context.at(key),
            CKPT,
            fix_hint="Build the model with the configuration the checkpoint was trained with "
            "(number of classes, hidden size), or drop this key and train it anew.",
            evidence={"checkpoint_shape": list(ours), "model_shape": list(theirs)},
        )
