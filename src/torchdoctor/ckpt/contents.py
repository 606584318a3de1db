"""What a loaded checkpoint holds: its tensors, state_dicts, optimizer and training state.

:func:`describe` walks the loaded object once and returns plain records; the detectors and
renderers work on those records and never touch tensors themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from torchdoctor.ckpt.loading import Format, LoadedCheckpoint
from torchdoctor.ckpt.safetensors_file import SafetensorsFile
from torchdoctor.ckpt.structure import counters, is_state_dict, param_groups, top_level
from torchdoctor.ckpt.values import count_non_finite

__all__ = [
    "CheckpointContents",
    "LiveTensors",
    "StateDict",
    "TensorInfo",
    "describe",
    "describe_live",
    "join_key",
]

# Names under which training code commonly stores the model's weights, best first.
_MODEL_NAMES = (
    "model",
    "state_dict",
    "model_state_dict",
    "model_state",
    "net",
    "network",
    "module",
    "weights",
    "params",
)
_MAX_DEPTH = 8

LiveTensors = dict[str, Callable[[], Any]]
"""Full key (as in :attr:`TensorInfo.key`) -> a function returning the loaded tensor."""


@dataclass(frozen=True, slots=True)
class TensorInfo:
    """One tensor of the checkpoint.

    Attributes:
        key: its place: the state_dict key for a bare state_dict, otherwise the
            container path joined by ``/`` (``model/fc.weight``,
            ``optimizer/state/0/exp_avg``).
        shape: its shape.
        dtype: torch's name of its dtype (``float32``).
        nbytes: bytes its elements occupy.
        saved_from: the device its storage was saved from (``cpu``, ``cuda:0``); ``None``
            when the format does not record it (safetensors).
        nan: number of NaN elements.
        inf: number of infinite elements.
    """

    key: str
    shape: tuple[int, ...]
    dtype: str
    nbytes: int
    saved_from: str | None = None
    nan: int = 0
    inf: int = 0

    @property
    def numel(self) -> int:
        """Number of elements."""
        count = 1
        for size in self.shape:
            count *= size
        return count


@dataclass(frozen=True, slots=True)
class StateDict:
    """A mapping of parameter names to tensors found in the checkpoint.

    Attributes:
        path: where it sits: ``""`` for a bare state_dict, else the container path
            (``model``, ``state_dict``).
        tensors: its entries, each keyed by its own state_dict key.
    """

    path: str
    tensors: tuple[TensorInfo, ...]

    def by_key(self) -> dict[str, TensorInfo]:
        """Entries by state_dict key."""
        return {t.key: t for t in self.tensors}


@dataclass(frozen=True, slots=True)
class CheckpointContents:
    """Everything torchdoctor learned about a checkpoint, as plain data.

    Attributes:
        path: the file.
        format: ``torch-zip``, ``torch-legacy`` or ``safetensors``.
        file_size: bytes on disk.
        kind: ``state_dict`` (a bare state_dict), ``weights`` (state_dicts inside a
            dict, no training state), ``training`` (weights plus optimizer state or an
            epoch/step counter), ``module`` (a pickled ``nn.Module``), ``refused`` (not
            loaded) or ``other``.
        top_level: the top-level entries and a short description of each.
        tensors: every tensor, wherever it sits.
        state_dicts: the model state_dicts, the primary one first.
        optimizer_paths: where optimizer state_dicts sit.
        scheduler_paths: where LR-scheduler state_dicts sit.
        counters: epoch/step counters at the top level, by name.
        scheduler_used: the optimizer's parameter groups carry ``initial_lr``, which only
            an LR scheduler sets.
        unsafe_globals: classes the pickle needs beyond the ``weights_only`` allowlist.
        holds_module: the pickle holds whole ``nn.Module`` objects.
        mmap: tensors were memory-mapped, not read into memory.
        trusted: loaded with ``weights_only=False``.
    """

    path: str
    format: str
    file_size: int
    kind: str
    top_level: tuple[tuple[str, str], ...] = ()
    tensors: tuple[TensorInfo, ...] = ()
    state_dicts: tuple[StateDict, ...] = ()
    optimizer_paths: tuple[str, ...] = ()
    scheduler_paths: tuple[str, ...] = ()
    counters: tuple[tuple[str, str], ...] = ()
    scheduler_used: bool = False
    unsafe_globals: tuple[str, ...] = ()
    holds_module: bool = False
    mmap: bool = False
    trusted: bool = False

    @property
    def primary(self) -> StateDict | None:
        """The state_dict most likely to be the model's weights."""
        return self.state_dicts[0] if self.state_dicts else None

    @property
    def tensor_bytes(self) -> int:
        """Bytes of all tensor elements; tensors that share a storage each count in full."""
        return sum(t.nbytes for t in self.tensors)


def join_key(path: str, key: object) -> str:
    """``model`` + ``fc.weight`` -> ``model/fc.weight``; a bare key stays as it is."""
    return f"{path}/{key}" if path else str(key)


def describe(loaded: LoadedCheckpoint) -> CheckpointContents:
    """Walk a loaded checkpoint and describe it, counting non-finite values on the way."""
    return describe_live(loaded)[0]


def describe_live(loaded: LoadedCheckpoint) -> tuple[CheckpointContents, LiveTensors]:
    """:func:`describe`, plus access to the loaded tensors by full key."""
    base: dict[str, Any] = {
        "path": str(loaded.path),
        "format": loaded.format.value,
        "file_size": loaded.file_size,
        "unsafe_globals": loaded.unsafe_globals,
        "holds_module": loaded.holds_module,
        "mmap": loaded.mmap,
        "trusted": loaded.trusted,
    }
    if loaded.obj is None:
        return CheckpointContents(kind="refused", **base), {}
    walker = _Walker(loaded)
    root = walker.normalise(loaded.obj)
    walker.walk(root, "", 0)
    state_dicts = sorted(walker.state_dicts, key=_primary_rank)
    optimizer_groups = [g for path in walker.optimizers for g in param_groups(root, path)]
    contents = CheckpointContents(
        kind=_kind(root, loaded, walker),
        top_level=top_level(root),
        tensors=tuple(walker.tensors),
        state_dicts=tuple(state_dicts),
        optimizer_paths=tuple(walker.optimizers),
        scheduler_paths=tuple(walker.schedulers),
        counters=counters(root),
        scheduler_used=any("initial_lr" in group for group in optimizer_groups),
        **base,
    )
    return contents, walker.live


class _Walker:
    """One pass over the loaded object, collecting tensors and recognised containers."""

    def __init__(self, loaded: LoadedCheckpoint) -> None:
        self.loaded = loaded
        self.tensors: list[TensorInfo] = []
        self.state_dicts: list[StateDict] = []
        self.optimizers: list[str] = []
        self.schedulers: list[str] = []
        self.live: LiveTensors = {}

    def normalise(self, value: Any) -> Any:
        """A pickled module (trusted load) is described through its state_dict."""
        import torch

        if isinstance(value, torch.nn.Module):
            return value.state_dict()
        return value

    def walk(self, value: Any, path: str, depth: int) -> None:
        value = self.normalise(value)
        if depth > _MAX_DEPTH:
            return
        if is_state_dict(value) and not self.inside_optimizer(path):
            infos = [self.info(key, value, key) for key in _tensor_keys(value)]
            for info in infos:
                self.live[join_key(path, info.key)] = _getter(value, info.key)
            self.state_dicts.append(StateDict(path, tuple(infos)))
            self.tensors += [_rekeyed(info, join_key(path, info.key)) for info in infos]
            return
        if isinstance(value, Mapping):
            self.note_container(value, path)
            for key in value:
                self.visit(value[key], join_key(path, key), depth)
        elif isinstance(value, (list, tuple)):
            for index, item in enumerate(value):
                self.visit(item, join_key(path, index), depth)

    def inside_optimizer(self, path: str) -> bool:
        # An optimizer's per-parameter state ({"step": ..., "exp_avg": ...}) is a mapping
        # of strings to tensors too, but not a model's weights.
        return any(path.startswith(join_key(opt, "state/")) for opt in self.optimizers)

    def visit(self, value: Any, path: str, depth: int) -> None:
        import torch

        if isinstance(value, torch.Tensor):
            self.tensors.append(self.tensor_info(path, value))
            self.live[path] = _constant(value)
        else:
            self.walk(value, path, depth + 1)

    def note_container(self, value: Mapping[Any, Any], path: str) -> None:
        keys = set(value)
        if {"state", "param_groups"} <= keys:
            self.optimizers.append(path)
        elif "last_epoch" in keys and ({"base_lrs", "_last_lr"} & keys):
            self.schedulers.append(path)

    def info(self, key: str, mapping: Mapping[str, Any], name: str) -> TensorInfo:
        if isinstance(mapping, SafetensorsFile):
            shape, dtype = mapping.describe(key)
            tensor = mapping[key]  # read one tensor at a time, then let it go
            nan, inf = count_non_finite(tensor)
            return TensorInfo(name, shape, dtype, _nbytes(tensor), None, nan, inf)
        return self.tensor_info(name, mapping[key])

    def tensor_info(self, name: str, tensor: Any) -> TensorInfo:
        saved_from = self.location_of(tensor)
        if saved_from is None and self.loaded.format is not Format.SAFETENSORS:
            saved_from = _only_location(self.loaded.locations)
        nan, inf = count_non_finite(tensor)
        return TensorInfo(
            name,
            tuple(tensor.shape),
            str(tensor.dtype).removeprefix("torch."),
            _nbytes(tensor),
            saved_from,
            nan,
            inf,
        )

    def location_of(self, tensor: Any) -> str | None:
        try:
            storage = tensor.untyped_storage()
        except (RuntimeError, NotImplementedError):  # sparse and other storage-less layouts
            return _only_location(self.loaded.locations)
        if storage.nbytes():
            return self.loaded.locations.get(storage.data_ptr())
        return None


def _tensor_keys(mapping: Mapping[str, Any]) -> list[str]:
    if isinstance(mapping, SafetensorsFile):
        return list(mapping)
    import torch

    return [key for key, value in mapping.items() if isinstance(value, torch.Tensor)]


def _getter(mapping: Mapping[str, Any], key: str) -> Callable[[], Any]:
    return lambda: mapping[key]


def _constant(value: Any) -> Callable[[], Any]:
    return lambda: value


def _nbytes(tensor: Any) -> int:
    return int(tensor.numel() * tensor.element_size())


def _only_location(locations: Mapping[int, str]) -> str | None:
    # Empty storages have no address to look up; if the file used one device, it is that.
    places = set(locations.values())
    return places.pop() if len(places) == 1 else None


def _rekeyed(info: TensorInfo, key: str) -> TensorInfo:
    return TensorInfo(key, info.shape, info.dtype, info.nbytes, info.saved_from, info.nan, info.inf)


def _primary_rank(state_dict: StateDict) -> tuple[int, int]:
    name = state_dict.path.rsplit("/", 1)[-1]
    preferred = _MODEL_NAMES.index(name) if name in _MODEL_NAMES else len(_MODEL_NAMES)
    if state_dict.path == "":
        preferred = -1
    return preferred, -len(state_dict.tensors)


def _kind(root: Any, loaded: LoadedCheckpoint, walker: _Walker) -> str:
    if loaded.holds_module:
        return "module"
    if is_state_dict(root):
        return "state_dict"
    if walker.state_dicts and (walker.optimizers or counters(root)):
        return "training"
    return "weights" if walker.state_dicts else "other"
