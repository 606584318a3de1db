"""The facts a report carries, declared once: their sections, keys and types.

:attr:`Report.facts <torchdoctor.findings.Report.facts>` is a :class:`Facts` mapping:
every depth writes ``report.facts["steps"] = 12`` as before, and the mapping checks the
key against the table below and the value against the key's declared type. Renderers read
a fact by name with :meth:`Fact.get`, which answers the declared type or ``None`` (a
report read back from JSON may hold anything), instead of decoding it themselves.

A wrong key or type is a bug of ours. It raises :class:`FactError` when
``TORCHDOCTOR_STRICT_FACTS`` is set (the test suite sets it); in a user's run the value
is kept as it is, so a slip never costs the user a report. To add a fact, add one
``_fact(...)`` line to its section here.

Facts are JSON-ready values: numbers, strings, lists and string-keyed dicts. Display
choices (how deep a summary table goes) are render options, never facts.
"""

from __future__ import annotations

import enum
import functools
import os
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypedDict, TypeVar

__all__ = [
    "FACTS",
    "Fact",
    "FactError",
    "Facts",
    "ForecastDetail",
    "ForecastPoint",
    "ModelFact",
    "OptimizerFact",
    "Section",
    "SummaryRow",
    "check_fact",
]

T = TypeVar("T")
STRICT_VARIABLE = "TORCHDOCTOR_STRICT_FACTS"


class FactError(TypeError):
    """A fact written under an undeclared key or with a value of the wrong type."""


class Section(enum.Enum):
    """Which part of torchdoctor writes a fact."""

    TOOL = "tool"  # every command: internal errors
    RUN = "run"  # a watched run: counts, timings, what was watched
    DISTRIBUTED = "distributed"  # ranks, launcher, cross-rank checks
    CHECK = "check"  # pre-flight: model, batch, probes
    SUMMARY = "summary"  # check's model summary
    FORECAST = "forecast"  # check's memory forecast
    LINT = "lint"
    CKPT = "ckpt"
    ENV = "env"


class SummaryRow(TypedDict, total=False):
    """One module of the model summary (``facts["summary"]``)."""

    module: str
    type: str
    depth: int
    parameters: int
    trainable: int
    buffers: int
    dtype: str | None
    device: str | None
    output_shape: list[int] | None
    activation_bytes: int | None


class ForecastPoint(TypedDict, total=False):
    """One batch size of the memory forecast (``facts["forecast"]``)."""

    batch_size: int
    peak_bytes: int
    fits: bool | None
    breakdown: dict[str, int]


class ForecastDetail(TypedDict, total=False):
    """Everything else of the memory forecast (``facts["forecast_detail"]``)."""

    device: str
    amp: str | None
    device_memory: int | None
    usable_bytes: int | None
    largest_batch_size: int | None
    largest_is_bound: bool  # still fits at largest_batch_size: "at least", not a limit
    per_sample_bytes: float | None
    top_modules: list[dict[str, Any]]
    remedies: list[dict[str, Any]]
    remedy_batch_size: int | None  # the batch size every remedy was measured at
    remedy_baseline_bytes: int | None  # that batch size's own peak, what remedies save from
    method: str
    error: str


class ModelFact(TypedDict, total=False):
    """One model a watched run trained (``facts["models"]``)."""

    name: str
    parameters: int
    trainable: int


class OptimizerFact(TypedDict, total=False):
    """One optimizer a watched run stepped (``facts["optimizers"]``)."""

    name: str
    steps: int
    parameters: int


_NUMBER = (int, float)


@dataclass(frozen=True, slots=True)
class Fact(Generic[T]):
    """One declared fact.

    Attributes:
        key: its name in ``Report.facts`` and in the JSON report.
        section: the part of torchdoctor that writes it.
        kinds: the JSON types its value may have (``bool`` never counts as a number).
        record: for a ``dict`` value, or each item of a ``list`` value, the TypedDict
            naming the keys it may have.
        doc: what it means, in a few words.
    """

    key: str
    section: Section
    kinds: tuple[type, ...]
    record: type | None
    doc: str

    def problem(self, value: object) -> str | None:
        """Why ``value`` cannot be this fact, or ``None`` when it can."""
        if value is None or not isinstance(value, self.kinds):
            return f"must be {' or '.join(k.__name__ for k in self.kinds)}"
        if isinstance(value, bool) and bool not in self.kinds:
            return "must be a number, not a bool"
        if self.record is None:
            return None
        hints = _record_hints(self.record)
        items = value if isinstance(value, list) else [value]
        for item in items:
            if not isinstance(item, Mapping):
                return f"must hold {self.record.__name__} records"
            for key, field_value in item.items():
                if key not in hints:
                    return f"has a key {key!r} that {self.record.__name__} does not declare"
                if not _matches(field_value, hints[key]):
                    return f"has {key}={field_value!r:.40} that is not {hints[key]}"
        return None

    def get(self, facts: Mapping[str, Any]) -> T | None:
        """The fact's value when present and of its declared type, else ``None``.

        Writes were checked in full; a report read back from JSON may hold anything, so
        a list of records keeps its mappings only, and the fields of a record are the
        reader's to format with care.
        """
        value: Any = facts.get(self.key)
        if value is None or not isinstance(value, self.kinds):
            return None
        if isinstance(value, bool) and bool not in self.kinds:
            return None
        if self.record is not None and isinstance(value, list):
            value = [item for item in value if isinstance(item, Mapping)]
        return value  # type: ignore[no-any-return]


@functools.cache
def _record_hints(record: type) -> dict[str, Any]:
    return typing.get_type_hints(record)


def _matches(value: object, hint: Any) -> bool:
    """Whether a JSON value fits a record field's annotation (one level of containers:
    ``list[int]`` checks it is a list)."""
    if hint is Any:
        return True
    if hint is type(None):
        return value is None
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_matches(value, option) for option in typing.get_args(hint))
    if origin is not None:
        return isinstance(value, origin)
    if hint is float:
        return isinstance(value, _NUMBER) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)


FACTS: dict[str, Fact[Any]] = {}


def _fact(
    key: str, section: Section, kinds: type | tuple[type, ...], doc: str, record: type | None = None
) -> Fact[Any]:
    declared: Fact[Any] = Fact(
        key, section, kinds if isinstance(kinds, tuple) else (kinds,), record, doc
    )
    FACTS[key] = declared
    return declared


S = Section
INTERNAL_ERRORS: Fact[list[str]] = _fact(
    "internal_errors", S.TOOL, list, "tracebacks of TD001 findings"
)

STEPS: Fact[int] = _fact("steps", S.RUN, int, "optimizer steps completed")
_fact("backward_calls", S.RUN, int, "backward passes seen")
_fact("sampled_steps", S.RUN, int, "steps whose statistics were read")
_fact("step_time_ms", S.RUN, _NUMBER, "median step time")
_fact("monitor_time_s", S.RUN, _NUMBER, "time spent in the monitor")
_fact("duration_s", S.RUN, _NUMBER, "wall time of the run")
_fact("optimizers", S.RUN, list, "the optimizers stepped", OptimizerFact)
_fact("models", S.RUN, list, "the models trained", ModelFact)
_fact("manual_updates", S.RUN, int, "parameter updates made without an optimizer")
WATCHED: Fact[str] = _fact("watched", S.RUN, str, "what the monitor saw train, in words")
_fact("batches", S.RUN, int, "batches drawn from data loaders")
_fact("batch_wait_s", S.RUN, _NUMBER, "time spent waiting for batches")
_fact("ended_by_signal", S.RUN, str, "the signal that ended the script")
_fact("stopped_at_max_steps", S.RUN, int, "the step --max-steps stopped the run at")
_fact("unavailable_hooks", S.RUN, list, "hooks this torch does not offer")
_fact("cuda_syncs_per_step", S.RUN, _NUMBER, "median host-device syncs per step")
_fact("cuda", S.RUN, dict, "CUDA memory in MiB")
_fact("resident_mib", S.RUN, _NUMBER, "resident memory of the process")
_fact("input_wait_fraction", S.RUN, _NUMBER, "worst share of a step spent waiting for data")
SERIES_STEPS: Fact[dict[str, list[int]]] = _fact(
    "series_steps", S.RUN, dict, "the step of each value of a series"
)
_fact("script", S.RUN, str, "the script run (torchdoctor demo)")

_fact("rank", S.DISTRIBUTED, int, "this process's rank")
_fact("world_size", S.DISTRIBUTED, int, "processes in the job")
_fact("ranks", S.DISTRIBUTED, dict, "per rank: steps, exit status, process")
_fact("missing_ranks", S.DISTRIBUTED, list, "ranks that sent no report")
_fact("stopped_hung_job", S.DISTRIBUTED, bool, "the job hung and was stopped")
_fact("launcher", S.DISTRIBUTED, str, "what launched the ranks")
_fact("nproc_per_node", S.DISTRIBUTED, int, "processes launched per node")
_fact("cross_rank_checks", S.DISTRIBUTED, int, "rounds of cross-rank comparison")
_fact("cross_rank_bytes", S.DISTRIBUTED, int, "bytes sent by the cross-rank checks")
_fact("cross_rank_seconds", S.DISTRIBUTED, _NUMBER, "time spent in cross-rank checks")
_fact("cross_rank_checks_stopped", S.DISTRIBUTED, str, "why the cross-rank checks stopped")

_fact("target", S.CHECK, str, "the factory checked (module:function)")
_fact("seconds", S.CHECK, _NUMBER, "wall time of the check")
_fact("probe_seconds", S.CHECK, dict, "wall time per probe")
_fact("seed", S.CHECK, int, "the seed of every forward")
_fact("model", S.CHECK, str, "the model's class")
_fact("device", S.CHECK, str, "the device checked on")
_fact("loss", S.CHECK, str, "the loss function")
_fact("batch", S.CHECK, dict, "shape of each tensor of the batch")
LAYER_GRAD_NORMS: Fact[dict[str, float]] = _fact(
    "layer_grad_norms", S.CHECK, dict, "gradient norm per parameter"
)
_fact("warnings", S.CHECK, list, "warnings the user's code raised during the check")
_fact("threads", S.CHECK, int, "the thread count the probes ran with")
PROBES_SKIPPED: Fact[str] = _fact("probes_skipped", S.CHECK, str, "why the probes did not run")

SUMMARY: Fact[list[SummaryRow]] = _fact(
    "summary", S.SUMMARY, list, "the model summary, module by module", SummaryRow
)
SHARED_PARAMETERS: Fact[list[list[str]]] = _fact(
    "shared_parameters", S.SUMMARY, list, "names of each parameter held under several names"
)
SUMMARY_NOTE: Fact[str] = _fact(
    "summary_note", S.SUMMARY, str, "why shapes and activations are missing"
)

FORECAST: Fact[list[ForecastPoint]] = _fact(
    "forecast", S.FORECAST, list, "peak memory per batch size", ForecastPoint
)
FORECAST_DETAIL: Fact[ForecastDetail] = _fact(
    "forecast_detail", S.FORECAST, dict, "device, largest batch, remedies", ForecastDetail
)

_fact("files", S.LINT, int, "files read")
_fact("config", S.LINT, str, "the configuration file used")
_fact("baseline_known", S.LINT, int, "findings dropped as known by the baseline")

CHECKPOINT: Fact[dict[str, Any]] = _fact("checkpoint", S.CKPT, dict, "what the checkpoint holds")
OTHER_CHECKPOINT: Fact[dict[str, Any]] = _fact(
    "other_checkpoint", S.CKPT, dict, "what the second checkpoint of a diff holds"
)
COMPARISON: Fact[dict[str, Any]] = _fact(
    "comparison", S.CKPT, dict, "how the checkpoint fits the model"
)
DIFF: Fact[dict[str, Any]] = _fact("diff", S.CKPT, dict, "what differs between two checkpoints")
REMAPPED: Fact[str] = _fact("remapped", S.CKPT, str, "where the remapped checkpoint was written")

ENVIRONMENT: Fact[dict[str, Any]] = _fact("environment", S.ENV, dict, "the environment's facts")


def check_fact(key: str, value: object) -> None:
    """Raise :class:`FactError` when ``value`` cannot be the fact ``key``, in strict mode.

    Strict mode is on while ``TORCHDOCTOR_STRICT_FACTS`` is set to anything but ``0``.
    """
    if os.environ.get(STRICT_VARIABLE, "0") in ("", "0"):
        return
    declared = FACTS.get(key)
    if declared is None:
        raise FactError(
            f"fact {key!r} is not declared: add it to a section of torchdoctor/facts.py"
        )
    problem = declared.problem(value)
    if problem is not None:
        raise FactError(f"fact {key!r} {problem}; got {type(value).__name__} {value!r:.80}")


class Facts(dict[str, Any]):
    """``Report.facts``: a dict whose writes are checked against :data:`FACTS`.

    Every way of writing (``facts[k] = v``, ``update``, ``setdefault``, the constructor)
    checks; :meth:`unchecked` builds one from a report read back from JSON, whose facts
    the renderers read through :meth:`Fact.get`.
    """

    def __init__(self, items: Mapping[str, Any] | Iterable[tuple[str, Any]] = (), /) -> None:
        super().__init__()
        self.update(items)

    @classmethod
    def unchecked(cls, items: Mapping[str, Any]) -> Facts:
        """Facts taken as they are (a report written by another version, read back)."""
        facts = cls()
        dict.update(facts, items)
        return facts

    def __setitem__(self, key: str, value: Any) -> None:
        check_fact(key, value)
        super().__setitem__(key, value)

    def setdefault(self, key: str, default: Any = None) -> Any:
        if key not in self:
            self[key] = default
        return self[key]

    def update(self, *others: Any, **more: Any) -> None:
        for other in (*others, more):
            pairs = other.items() if isinstance(other, Mapping) else other
            for key, value in pairs:
                self[key] = value

    def copy(self) -> Facts:
        return Facts.unchecked(self)
