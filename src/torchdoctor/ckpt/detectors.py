"""Detectors of the ``ckpt`` depth: each reads a :class:`CheckpointContext` and reports through
its :class:`~torchdoctor._kernel.Reporter`.

A detector sees only plain records (:mod:`torchdoctor.ckpt.contents`,
:mod:`torchdoctor.ckpt.compare`), never tensors, so it cannot touch the user's file.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from torchdoctor._kernel import Reporter
from torchdoctor.ckpt.compare import Comparison
from torchdoctor.ckpt.contents import CheckpointContents, StateDict, TensorInfo
from torchdoctor.findings import Confidence, Depth, Location, Severity
from torchdoctor.rules.detectors import detector
from torchdoctor.rules.registry import finding

__all__ = ["CheckpointContext", "examples", "human_bytes"]

CKPT = Depth.CKPT


@dataclass(frozen=True, slots=True)
class CheckpointContext:
    """What the ``ckpt`` detectors look at: the file's contents and, optionally, a model."""

    contents: CheckpointContents
    comparison: Comparison | None = None

    def at(self, key: str | None = None) -> Location:
        """A location in this checkpoint, at a key when given."""
        return Location(path=self.contents.path, object=key or None)


def human_bytes(size: float) -> str:
    """``1536`` -> ``1.5 KiB``."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"  # pragma: no cover - the loop always returns


def examples(items: Sequence[str], limit: int = 3) -> str:
    """``'a', 'b', 'c' and 4 more``."""
    shown = ", ".join(f"'{item}'" for item in items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def _where(state_dict: StateDict) -> str:
    return f"the state_dict at '{state_dict.path}'" if state_dict.path else "the state_dict"


@detector("TD902", depth=CKPT)
def unsafe_checkpoint_load(context: CheckpointContext, out: Reporter) -> None:
    """The pickle imports classes that ``weights_only=True`` loading refuses."""
    contents = context.contents
    if not contents.unsafe_globals:
        return
    names = ", ".join(contents.unsafe_globals[:6])
    if contents.trusted:
        outcome = "torchdoctor loaded it with weights_only=False because --trust was given"
    else:
        outcome = (
            "torchdoctor did not load it: with weights_only=False the pickle may run "
            "any code its author chose"
        )
    out.emit(
        finding(
            "TD902",
            f"{contents.path} can only be loaded by unpickling arbitrary objects: it imports "
            f"{names}, outside torch's weights_only allowlist; {outcome}.",
            context.at(),
            CKPT,
            fix_hint="Save only tensors and plain containers (`model.state_dict()` instead of "
            "the model, `vars(args)` instead of an argparse Namespace); if you trust "
            "this file's source, inspect it with `torchdoctor ckpt --trust`.",
            evidence={"globals": list(contents.unsafe_globals)},
        )
    )


@detector("TD903", depth=CKPT)
def whole_module_saved(context: CheckpointContext, out: Reporter) -> None:
    """The pickle holds ``nn.Module`` objects rather than their state_dicts."""
    contents = context.contents
    if not contents.holds_module:
        return
    owner = contents.unsafe_globals[0] if contents.unsafe_globals else "an nn.Module"
    out.emit(
        finding(
            "TD903",
            f"{contents.path} holds a whole pickled module ({owner}), not a state_dict: loading "
            "it needs weights_only=False and that class's code at the same import path.",
            context.at(),
            CKPT,
            fix_hint="Save `model.state_dict()` and rebuild the model in code before "
            "`load_state_dict`.",
        )
    )


@detector("TD901", depth=CKPT)
def saved_from_accelerator(context: CheckpointContext, out: Reporter) -> None:
    """Tensors were saved from a GPU, so loading them needs ``map_location``."""
    tensors = context.contents.tensors
    remote = [t for t in tensors if t.saved_from and t.saved_from != "cpu"]
    if not remote:
        return
    devices = sorted({t.saved_from for t in remote if t.saved_from})
    size = human_bytes(sum(t.nbytes for t in remote))
    out.emit(
        finding(
            "TD901",
            f"{len(remote)} of {len(tensors)} tensors ({size}) were saved from "
            f"{', '.join(devices)}, e.g. '{remote[0].key}': torch.load without map_location "
            "fails on a machine without that device and otherwise puts them back on "
            f"{devices[0]}, whatever device the loading process uses.",
            context.at(remote[0].key),
            CKPT,
            fix_hint='Load with `torch.load(path, map_location="cpu")` (or the target device); '
            "to make the file portable, save CPU copies "
            "(`{k: v.cpu() for k, v in state_dict.items()}`).",
            evidence={"devices": devices, "tensors": len(remote)},
        )
    )


def _prefixed(state_dict: StateDict, prefix: str) -> bool:
    keys = [t.key for t in state_dict.tensors]
    return bool(keys) and all(key.startswith(prefix) for key in keys)


def _model_has(
    context: CheckpointContext, segment: str, *, everywhere: bool = False
) -> bool | None:
    """Whether the compared model's keys carry ``segment`` (any key, or every key first)."""
    if context.comparison is None:
        return None
    keys = context.comparison.model_keys
    if everywhere:
        return bool(keys) and all(key.split(".", 1)[0] == segment for key in keys)
    return any(segment in key.split(".") for key in keys)


@detector("TD805", depth=CKPT)
def ddp_prefixed_state_dict(context: CheckpointContext, out: Reporter) -> None:
    """Every key of a state_dict starts with the ``module.`` of DDP/DataParallel."""
    model_has = _model_has(context, "module", everywhere=True)
    if model_has:
        return
    for state_dict in context.contents.state_dicts:
        if not _prefixed(state_dict, "module."):
            continue
        count, first = len(state_dict.tensors), state_dict.tensors[0].key
        out.emit(
            finding(
                "TD805",
                f"All {count} keys of {_where(state_dict)} start with 'module.' (e.g. '{first}'): "
                "it was saved from the DistributedDataParallel/DataParallel wrapper, so "
                'load_state_dict on the bare model fails with "Missing key(s)" for every key.',
                context.at(state_dict.path),
                CKPT,
                fix_hint="Save `model.module.state_dict()`; for this file, strip the prefix with "
                "`torch.nn.modules.utils.consume_prefix_in_state_dict_if_present(sd, "
                "'module.')` or `torchdoctor ckpt FILE --model ... --write-remapped OUT`.",
                evidence={"keys": count},
                confidence=Confidence.HIGH if model_has is False else Confidence.MEDIUM,
            )
        )


@detector("TD909", depth=CKPT)
def compiled_prefix_in_keys(context: CheckpointContext, out: Reporter) -> None:
    """Keys carry the ``_orig_mod.`` segment of a ``torch.compile`` wrapper."""
    if _model_has(context, "_orig_mod"):
        return
    for state_dict in context.contents.state_dicts:
        hits = [t.key for t in state_dict.tensors if "_orig_mod" in t.key.split(".")]
        if not hits:
            continue
        out.emit(
            finding(
                "TD909",
                f"{len(hits)} of {len(state_dict.tensors)} keys of {_where(state_dict)} carry "
                f"'_orig_mod.' (e.g. '{hits[0]}'): it was saved from the torch.compile wrapper, "
                "and an uncompiled model reports every one of them as unexpected.",
                context.at(state_dict.path),
                CKPT,
                fix_hint="Save the original module's weights: "
                "`getattr(model, '_orig_mod', model).state_dict()`; for this file, "
                "`torchdoctor ckpt FILE --model ... --write-remapped OUT`.",
                evidence={"keys": len(hits)},
            )
        )


@detector("TD905", depth=CKPT)
def incomplete_resume_checkpoint(context: CheckpointContext, out: Reporter) -> None:
    """A checkpoint with training state lacks the optimizer, scheduler or counter."""
    contents = context.contents
    if contents.kind != "training":
        return
    missing = []
    if not contents.optimizer_paths:
        missing.append("optimizer state (Adam/momentum buffers restart from zero)")
    if not contents.counters:
        missing.append("an epoch or step counter (the loop and schedule restart at 0)")
    if contents.scheduler_used and not contents.scheduler_paths:
        missing.append(
            "the LR scheduler's state (the optimizer's param_groups carry "
            "initial_lr, so one was used; the schedule restarts from its start)"
        )
    if not missing:
        return
    present = [name for name, _ in contents.counters] + list(contents.optimizer_paths)
    out.emit(
        finding(
            "TD905",
            f"{contents.path} holds training state ({examples(present)}) next to the model but "
            f"lacks {'; '.join(missing)}: a run resumed from it silently trains differently "
            "from the run that saved it.",
            context.at(),
            CKPT,
            fix_hint="Save everything a resume needs: `{'model': model.state_dict(), "
            "'optimizer': optimizer.state_dict(), 'scheduler': scheduler.state_dict(), "
            "'epoch': epoch}` (plus the GradScaler's state with AMP).",
            evidence={"missing": len(missing)},
        )
    )


def _bad_values(tensors: Sequence[TensorInfo]) -> list[TensorInfo]:
    return [t for t in tensors if t.nan or t.inf]


@detector("TD911", depth=CKPT)
def non_finite_in_checkpoint(context: CheckpointContext, out: Reporter) -> None:
    """Tensors hold NaN or Inf, one finding per top-level section."""
    sections: dict[str, list[TensorInfo]] = {}
    for tensor in context.contents.tensors:
        section = tensor.key.split("/", 1)[0] if "/" in tensor.key else ""
        sections.setdefault(section, []).append(tensor)
    for section, tensors in sections.items():
        bad = _bad_values(tensors)
        if not bad:
            continue
        where = f"'{section}'" if section else "the state_dict"
        detail = ", ".join(f"'{t.key}' ({t.nan} NaN, {t.inf} Inf of {t.numel})" for t in bad[:3])
        more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
        out.emit(
            finding(
                "TD911",
                f"{len(bad)} of {len(tensors)} tensors in {where} hold non-finite values: "
                f"{detail}{more}. A model loaded from it outputs NaN; training resumed from it "
                "cannot recover.",
                context.at(bad[0].key),
                CKPT,
                fix_hint="Resume from an earlier checkpoint, and save only after checking "
                "`torch.isfinite(loss)` (lower the learning rate, clip gradients, or use "
                "GradScaler with fp16).",
                evidence={
                    "tensors": len(bad),
                    "nan": sum(t.nan for t in bad),
                    "inf": sum(t.inf for t in bad),
                },
            )
        )


@detector("TD102", depth=CKPT)
def float64_weights(context: CheckpointContext, out: Reporter) -> None:
    """A model state_dict holds float64 tensors (scalars aside)."""
    for state_dict in context.contents.state_dicts:
        wide = [t for t in state_dict.tensors if t.dtype == "float64" and t.numel > 1]
        if not wide:
            continue
        out.emit(
            finding(
                "TD102",
                f"{len(wide)} of {len(state_dict.tensors)} tensors of {_where(state_dict)} are "
                f"float64 ({human_bytes(sum(t.nbytes for t in wide))}), e.g. '{wide[0].key}': "
                "the model trained in double precision, twice the memory of float32 and many "
                "times slower on GPUs.",
                context.at(state_dict.path),
                CKPT,
                fix_hint="Build the model in float32 (no `.double()`, no "
                "`torch.set_default_dtype(torch.float64)`); convert this file's weights "
                "with `{k: v.float() for k, v in sd.items()}`.",
                evidence={"tensors": len(wide)},
                severity=Severity.WARNING,
            )
        )
