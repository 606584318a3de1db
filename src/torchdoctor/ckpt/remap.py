"""Write a copy of a checkpoint with its keys renamed to fit a model.

The copy is written only when the proposed mapping makes every key and shape fit, so it
loads with ``strict=True``. It goes to a temporary file beside the target and is renamed
into place at the end, and it can never be the source file: a failure leaves nothing
behind and the original untouched.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from torchdoctor.ckpt.compare import Comparison, ModelEntry
from torchdoctor.ckpt.contents import CheckpointContents, LiveTensors
from torchdoctor.ckpt.detectors import examples
from torchdoctor.ckpt.loading import LoadedCheckpoint, load_checkpoint
from torchdoctor.errors import UsageError

__all__ = ["write_remapped"]


def write_remapped(
    loaded: LoadedCheckpoint,
    contents: CheckpointContents,
    live: LiveTensors,
    comparison: Comparison,
    model: Mapping[str, ModelEntry],
    out: Path,
) -> None:
    """Write ``loaded`` with its primary state_dict's keys renamed by the comparison's mapping.

    Raises:
        UsageError: the mapping does not make the checkpoint fit the model, ``out`` is the
            source file or a directory, or the written copy does not read back as expected.
    """
    _check_target(loaded.path, out)
    _check_complete(comparison)
    prefix = f"{comparison.state_dict_path}/" if comparison.state_dict_path else ""
    renamed = {
        comparison.mapping.apply(key[len(prefix) :]): get()
        for key, get in live.items()
        if key.startswith(prefix) and comparison.mapping.apply(key[len(prefix) :]) in model
    }
    state_dict = {key: renamed[key] for key in model if key in renamed}
    _atomic_write(out, lambda path: _save(loaded, comparison, state_dict, path))
    _verify(out, comparison.state_dict_path if out.suffix != ".safetensors" else "", model)


def _check_target(source: Path, out: Path) -> None:
    if out.is_dir():
        raise UsageError(f"--write-remapped {out} is a directory; give a file name")
    if out.resolve() == source.resolve() or (out.exists() and out.samefile(source)):
        raise UsageError(
            "--write-remapped must name a new file: torchdoctor never "
            f"modifies the checkpoint it reads ({source})"
        )


def _check_complete(comparison: Comparison) -> None:
    if comparison.loads_after_mapping:
        return
    problems = []
    if comparison.remaining_missing:
        problems.append(f"missing {examples(comparison.remaining_missing)}")
    if comparison.remaining_unexpected:
        problems.append(f"unexpected {examples(comparison.remaining_unexpected)}")
    if comparison.remaining_shape_mismatches:
        problems.append(f"shape mismatch {examples(comparison.remaining_shape_mismatches)}")
    raise UsageError(
        f"not writing a remapped copy: no key mapping makes the checkpoint fit "
        f"{comparison.model_name} ({'; '.join(problems)}); nothing was written"
    )


def _save(
    loaded: LoadedCheckpoint, comparison: Comparison, state_dict: dict[str, Any], path: Path
) -> None:
    if path.name.endswith(".safetensors"):
        from torchdoctor.ckpt.safetensors_file import save_safetensors

        save_safetensors(state_dict, path, {"format": "pt"})
        return
    import torch

    root = _replace(loaded.obj, comparison.state_dict_path, state_dict)
    torch.save(root, str(path))


def _replace(root: Any, path: str, state_dict: dict[str, Any]) -> Any:
    """A shallow copy of ``root`` with the state_dict at ``path`` replaced."""
    if not path:
        return state_dict
    head, _, rest = path.partition("/")
    if isinstance(root, (list, tuple)):
        items = list(root)
        items[int(head)] = _replace(items[int(head)], rest, state_dict)
        return type(root)(items) if isinstance(root, list) else tuple(items)
    key = next(k for k in root if str(k) == head)  # paths spell non-string keys as str
    copy = dict(root)
    copy[key] = _replace(root[key], rest, state_dict)
    return copy


def _atomic_write(out: Path, write: Any) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(
        prefix=f".{out.name}.",
        suffix=".tmp" + (".safetensors" if out.suffix == ".safetensors" else ""),
        dir=out.parent,
    )
    os.close(handle)
    temporary = Path(name)
    try:
        write(temporary)
        os.replace(temporary, out)
    finally:
        temporary.unlink(missing_ok=True)


def _verify(out: Path, state_dict_path: str, model: Mapping[str, ModelEntry]) -> None:
    from torchdoctor.ckpt.contents import describe

    written = describe(load_checkpoint(out))
    match = next((s for s in written.state_dicts if s.path == state_dict_path), None)
    shapes = {t.key: t.shape for t in match.tensors} if match else {}
    if shapes != {key: entry.shape for key, entry in model.items()}:
        out.unlink(missing_ok=True)
        raise UsageError(
            f"the remapped copy {out} did not read back with the model's keys "
            "and shapes; it was removed"
        )
