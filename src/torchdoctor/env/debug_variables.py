"""TD014: debugging switches left on in the environment, kept as a table of data."""

from __future__ import annotations

from dataclasses import dataclass

from torchdoctor._kernel import Reporter
from torchdoctor.env.facts import EnvFacts
from torchdoctor.findings import Depth, Location
from torchdoctor.rules.detectors import detector
from torchdoctor.rules.registry import finding

__all__ = ["DEBUG_VARIABLES", "DebugVariable"]


@dataclass(frozen=True, slots=True)
class DebugVariable:
    """An environment variable whose listed values turn on a costly debugging mode.

    Attributes:
        name: the variable.
        values: values (upper-cased) that switch the mode on.
        cost: what the mode does to every step, for the message.
    """

    name: str
    values: frozenset[str]
    cost: str


_ON = frozenset({"1", "TRUE", "YES", "ON"})

DEBUG_VARIABLES: tuple[DebugVariable, ...] = (
    DebugVariable(
        "TORCH_DISTRIBUTED_DEBUG",
        frozenset({"DETAIL"}),
        "every collective is wrapped in an extra consistency-check collective and "
        "DDP logs per-iteration details",
    ),
    DebugVariable(
        "NCCL_DEBUG", frozenset({"TRACE"}), "NCCL writes a log line for every collective call"
    ),
    DebugVariable(
        "PYTORCH_NO_CUDA_MEMORY_CACHING",
        _ON,
        "the CUDA caching allocator is off, so every tensor allocation and free "
        "calls cudaMalloc/cudaFree, which synchronise the device",
    ),
    DebugVariable(
        "TORCH_NCCL_BLOCKING_WAIT",
        _ON,
        "the host thread blocks until every NCCL collective finishes, so "
        "communication no longer overlaps with computation",
    ),
    DebugVariable(
        "NCCL_BLOCKING_WAIT",
        _ON,
        "(the older name of TORCH_NCCL_BLOCKING_WAIT) the host thread blocks until "
        "every NCCL collective finishes",
    ),
    DebugVariable(
        "TORCH_CUDA_SANITIZER",
        _ON,
        "CUDA Sanitizer checks every kernel's tensor accesses for stream races",
    ),
)


@detector("TD014", depth=Depth.ENV)
def debug_variables_left_on(env: EnvFacts, out: Reporter) -> None:
    """One finding per costly debugging variable that is switched on."""
    for variable in DEBUG_VARIABLES:
        value = env.variable(variable.name)
        if value is None or value.strip().upper() not in variable.values:
            continue
        out.emit(
            finding(
                "TD014",
                f"{variable.name}={value} is a debugging setting: {variable.cost}.",
                Location(object=variable.name),
                Depth.ENV,
                fix_hint=f"Unset {variable.name} for training runs; set it only while debugging.",
                evidence={"value": value},
            )
        )
