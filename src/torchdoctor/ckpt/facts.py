"""The ckpt records as JSON-ready facts for :attr:`Report.facts <torchdoctor.Report.facts>`."""

from __future__ import annotations

from collections import Counter
from typing import Any

from torchdoctor.ckpt.compare import Comparison
from torchdoctor.ckpt.contents import CheckpointContents
from torchdoctor.ckpt.diff import CheckpointDiff

__all__ = ["comparison_facts", "contents_facts", "diff_facts"]


def contents_facts(contents: CheckpointContents) -> dict[str, Any]:
    """What the file holds: layout, kind, tensor counts by dtype and device, every tensor."""
    tensors = contents.tensors
    return {
        "path": contents.path,
        "format": contents.format,
        "file_size": contents.file_size,
        "kind": contents.kind,
        "mmap": contents.mmap,
        "trusted": contents.trusted,
        "unsafe_globals": list(contents.unsafe_globals),
        "top_level": dict(contents.top_level),
        "counters": dict(contents.counters),
        "state_dicts": [{"path": s.path, "tensors": len(s.tensors)} for s in contents.state_dicts],
        "optimizers": list(contents.optimizer_paths),
        "schedulers": list(contents.scheduler_paths),
        "tensor_count": len(tensors),
        "tensor_bytes": contents.tensor_bytes,
        "dtypes": dict(Counter(t.dtype for t in tensors)),
        "saved_from": dict(Counter(t.saved_from or "unknown" for t in tensors)),
        "non_finite_tensors": sum(1 for t in tensors if t.nan or t.inf),
        "tensors": [
            {
                "key": t.key,
                "shape": list(t.shape),
                "dtype": t.dtype,
                "saved_from": t.saved_from,
                "nan": t.nan,
                "inf": t.inf,
            }
            for t in tensors
        ],
    }


def comparison_facts(comparison: Comparison) -> dict[str, Any]:
    """How the checkpoint fits the model, and the proposed key mapping."""
    return {
        "model": comparison.model_name,
        "state_dict": comparison.state_dict_path,
        "model_keys": len(comparison.model_keys),
        "loads_strict": comparison.loads_strict,
        "loads_after_mapping": comparison.loads_after_mapping,
        "missing": list(comparison.missing),
        "unexpected": list(comparison.unexpected),
        "shape_mismatches": [
            {"key": k, "checkpoint": list(a), "model": list(b)}
            for k, a, b in comparison.shape_mismatches
        ],
        "dtype_mismatches": [
            {"key": k, "checkpoint": a, "model": b} for k, a, b in comparison.dtype_mismatches
        ],
        "mapping": [
            {"old": r.old, "new": r.new, "keys": r.keys} for r in comparison.mapping.rewrites
        ],
    }


def diff_facts(first: str, second: str, diff: CheckpointDiff) -> dict[str, Any]:
    """Keys only in one file, and shape, dtype and largest difference of the common ones."""
    return {
        "first": first,
        "second": second,
        "aligned_on": diff.aligned_on,
        "identical": diff.identical,
        "only_first": list(diff.only_first),
        "only_second": list(diff.only_second),
        "tensors": [
            {
                "key": d.key,
                "shape": list(d.shape),
                "other_shape": list(d.other_shape),
                "dtype": d.dtype,
                "other_dtype": d.other_dtype,
                "max_abs_difference": d.max_abs_difference,
            }
            for d in diff.common
        ],
    }
