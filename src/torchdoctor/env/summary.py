"""Plain-text view of the environment facts, printed above the findings of ``env``.

Reads only ``Report.facts["environment"]`` (what ``--format json`` carries); no I/O, no
torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torchdoctor.facts import ENVIRONMENT

__all__ = ["render_env_summary"]


def _flag(value: Any) -> str:
    return "n/a" if value is None else str(value)


def render_env_summary(facts: Mapping[str, Any]) -> str:
    """The facts as aligned ``name: value`` lines, grouped."""
    env = ENVIRONMENT.get(facts)
    if not env:
        return ""
    rows: list[tuple[str, str]] = [
        ("python", env["python"]),
        ("platform", env["platform"]),
        ("torch", env["torch"] or "not installed"),
        ("built with CUDA", _flag(env["torch_cuda"])),
        ("cuDNN", _flag(env["cudnn"])),
        ("CUDA available", _flag(env["cuda_available"])),
    ]
    rows += [
        (f"cuda:{d['index']}", f"{d['name']} (sm {d['capability']}, {d['memory'] / 2**30:.1f} GiB)")
        for d in env["devices"]
    ]
    rows += [
        ("CPUs", f"{_flag(env['usable_cpus'])} usable of {_flag(env['cpu_count'])}"),
        (
            "threads",
            f"{_flag(env['intra_op_threads'])} intra-op, {_flag(env['inter_op_threads'])} inter-op",
        ),
        ("start method", env["start_method"] or f"{env['default_start_method']} (default)"),
        ("default dtype", _flag(env["default_dtype"])),
        (
            "cuDNN flags",
            f"enabled={_flag(env['cudnn_enabled'])} "
            f"benchmark={_flag(env['cudnn_benchmark'])} "
            f"deterministic={_flag(env['cudnn_deterministic'])}",
        ),
        ("deterministic algorithms", _flag(env["deterministic_algorithms"])),
        (
            "TF32",
            f"matmul={_flag(env['matmul_tf32'])} cudnn={_flag(env['cudnn_tf32'])} "
            f"float32_matmul_precision={_flag(env['float32_matmul_precision'])}",
        ),
        ("anomaly detection", _flag(env["anomaly_detection"])),
    ]
    rows += [(name, value) for name, value in env["variables"].items()]
    rows += [
        (f"package {name}", version) for name, version in env["packages"].items() if name != "torch"
    ]
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name:<{width}}  {value}" for name, value in rows) + "\n\n"
