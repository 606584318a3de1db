"""Open a checkpoint safely: sniff its format, refuse unsafe pickles, memory-map big files.

Loading is ``weights_only=True`` unless the caller trusts the file. Before anything is
unpickled, the pickle is scanned as data (:mod:`torchdoctor.ckpt.pickle_scan`) for the
classes it would import; a file that needs classes outside torch's ``weights_only``
allowlist is not loaded at all, and the caller learns which classes those were. The file
is only ever opened for reading.
"""

from __future__ import annotations

import contextlib
import enum
import inspect
import io
import os
import pickle
import sys
import zipfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torchdoctor._torch import require_torch
from torchdoctor.ckpt.pickle_scan import PickleScan, scan_pickle, scan_pickles
from torchdoctor.errors import UsageError, UserCodeError

__all__ = ["Format", "LoadedCheckpoint", "load_checkpoint"]

_ZIP_MAGIC = b"PK\x03\x04"
# The legacy format writes magic number, protocol version and system info pickles
# before the pickle of the object itself.
_LEGACY_PICKLES = 4


class Format(enum.Enum):
    """How a checkpoint file is laid out."""

    TORCH_ZIP = "torch-zip"  # torch.save since 1.6
    TORCH_LEGACY = "torch-legacy"  # torch.save(..., _use_new_zipfile_serialization=False)
    SAFETENSORS = "safetensors"


@dataclass(frozen=True, slots=True)
class LoadedCheckpoint:
    """A checkpoint file, opened.

    Attributes:
        path: the file.
        format: its layout.
        file_size: bytes on disk.
        obj: what ``torch.load`` returned; ``None`` when loading was refused.
        locations: device each storage was saved from, keyed by the loaded storage's
            ``data_ptr()`` (torch formats only; safetensors records no device).
        unsafe_globals: classes or functions the pickle imports that ``weights_only``
            loading does not allow. Non-empty means the file was refused, or loaded only
            because the caller trusted it.
        holds_module: the pickle holds whole ``nn.Module`` objects.
        mmap: the tensors are memory-mapped from the file rather than read into memory.
        trusted: loaded with ``weights_only=False``.
    """

    path: Path
    format: Format
    file_size: int
    obj: Any
    locations: Mapping[int, str] = field(default_factory=dict)
    unsafe_globals: tuple[str, ...] = ()
    holds_module: bool = False
    mmap: bool = False
    trusted: bool = False

    @property
    def refused(self) -> bool:
        """The file needs arbitrary unpickling and was not loaded."""
        return self.obj is None and bool(self.unsafe_globals)


def load_checkpoint(path: str | Path, *, trust: bool = False) -> LoadedCheckpoint:
    """Open ``path`` without running code from it, unless ``trust`` is set.

    A file whose pickle needs classes outside torch's ``weights_only`` allowlist comes back
    with ``obj=None`` and those classes in ``unsafe_globals`` when ``trust`` is false.

    Raises:
        UsageError: not a file, empty, truncated, corrupt, or not a checkpoint.
        UserCodeError: with ``trust``, the pickle itself raised while loading.
    """
    require_torch("torchdoctor ckpt")
    file = _readable_file(Path(path))
    size = file.stat().st_size
    fmt = _sniff(file)
    if fmt is Format.SAFETENSORS:
        from torchdoctor.ckpt.safetensors_file import open_safetensors

        return LoadedCheckpoint(file, fmt, size, open_safetensors(file), mmap=True)
    scan = _scan(file, fmt)
    unsafe = _unsafe_globals(file, fmt, scan)
    if unsafe and not trust:
        return LoadedCheckpoint(
            file, fmt, size, None, unsafe_globals=unsafe, holds_module=scan.holds_module
        )
    obj, locations, mapped = _torch_load(file, fmt, weights_only=not trust)
    return LoadedCheckpoint(
        file, fmt, size, obj, locations, unsafe, scan.holds_module, mapped, trusted=trust
    )


def _readable_file(file: Path) -> Path:
    if not file.exists():
        raise UsageError(f"{file}: no such file")
    if file.is_dir():
        raise UsageError(f"{file} is a directory; give the checkpoint file inside it")
    if not file.is_file():
        raise UsageError(f"{file} is not a regular file (a FIFO or a device)")
    if file.stat().st_size == 0:
        raise UsageError(f"{file} is empty (0 bytes): not a checkpoint")
    try:
        with file.open("rb"):
            pass
    except OSError as error:
        raise UsageError(f"{file} cannot be read: {error.strerror or error}") from None
    return file


def _sniff(file: Path) -> Format:
    with file.open("rb") as stream:
        head = stream.read(16)
    if head.startswith(_ZIP_MAGIC):
        return Format.TORCH_ZIP
    if head[:1] == b"\x80":  # pickle PROTO opcode: torch's legacy format
        return Format.TORCH_LEGACY
    if _looks_like_safetensors(file, head):
        return Format.SAFETENSORS
    raise UsageError(
        f"{file} is not a PyTorch checkpoint (neither a torch.save zip archive, "
        "a legacy torch.save pickle, nor a safetensors file)"
    )


def _looks_like_safetensors(file: Path, head: bytes) -> bool:
    if len(head) < 9:
        return False
    header_size = int.from_bytes(head[:8], "little")
    return head[8:9] == b"{" and 0 < header_size <= file.stat().st_size - 8


def _scan(file: Path, fmt: Format) -> PickleScan:
    try:
        if fmt is Format.TORCH_LEGACY:
            with file.open("rb") as stream:
                return scan_pickles(stream, _LEGACY_PICKLES)
        with zipfile.ZipFile(file) as archive:
            _check_members(file, archive)
            names = archive.namelist()
            if any(n.endswith("/constants.pkl") or "/code/" in n for n in names):
                raise UsageError(
                    f"{file} is a TorchScript archive (torch.jit.save), not a checkpoint; "
                    "load it with torch.jit.load, or save the model's state_dict instead"
                )
            data = next((n for n in names if n.endswith("data.pkl")), None)
            if data is None:
                raise UsageError(
                    f"{file} is a zip archive without data.pkl: not a torch.save checkpoint"
                )
            return scan_pickle(io.BytesIO(archive.read(data)))
    except (
        zipfile.BadZipFile,
        zipfile.LargeZipFile,
        EOFError,
        OSError,
        ValueError,
        pickle.UnpicklingError,
        RuntimeError,
    ) as err:
        raise UsageError(f"{file} is truncated or corrupt: {_first_line(err)}") from None
    except MemoryError:
        raise UsageError(f"{file}: not enough memory to read its pickle") from None


# A member may inflate to at most this many times its compressed size (torch.save stores
# members uncompressed), and data.pkl is read into memory only below _PICKLE_LIMIT.
_MAX_RATIO = 100
_RATIO_FLOOR = 16 << 20
_PICKLE_LIMIT = 1 << 30


def _check_members(file: Path, archive: zipfile.ZipFile) -> None:
    """Refuse archives torch would mis-read or that would cost more than the file: members
    outside one top folder (path traversal), sizes declared beyond the file, zip bombs."""
    size = file.stat().st_size
    tops: set[str] = set()
    for info in archive.infolist():
        name = info.filename
        parts = name.replace("\\", "/").split("/")
        if name.startswith(("/", "\\")) or ".." in parts or len(parts) < 2 or ":" in parts[0]:
            raise UsageError(
                f"{file} has a zip member outside its archive folder ({name!r}): "
                "not a torch.save checkpoint, and not safe to read"
            )
        tops.add(parts[0])
        if info.header_offset + info.compress_size > size:
            raise UsageError(
                f"{file}: zip member {name!r} declares {info.compress_size} bytes "
                "beyond the end of the file (truncated or forged)"
            )
        if info.compress_type == zipfile.ZIP_STORED and info.compress_size != info.file_size:
            raise UsageError(
                f"{file}: zip member {name!r} declares {info.file_size} bytes "
                f"but stores {info.compress_size} (a forged header)"
            )
        if info.file_size > _RATIO_FLOOR and info.file_size > _MAX_RATIO * max(
            info.compress_size, 1
        ):
            raise UsageError(
                f"{file}: zip member {name!r} inflates {info.compress_size} bytes "
                f"to {info.file_size} (a zip bomb?); refused"
            )
        if name.endswith("data.pkl") and info.file_size > _PICKLE_LIMIT:
            raise UsageError(f"{file}: its pickle declares {info.file_size} bytes; refused")
    if len(tops) > 1:
        raise UsageError(
            f"{file} has zip members in several top folders "
            f"({', '.join(sorted(tops)[:3])}): not a torch.save checkpoint"
        )


def _unsafe_globals(file: Path, fmt: Format, scan: PickleScan) -> tuple[str, ...]:
    torch = require_torch("torchdoctor ckpt")
    if fmt is Format.TORCH_ZIP and hasattr(torch.serialization, "get_unsafe_globals_in_checkpoint"):
        try:
            found = set(torch.serialization.get_unsafe_globals_in_checkpoint(str(file)))
        except (
            pickle.UnpicklingError,
            RuntimeError,
            ValueError,
            EOFError,
            KeyError,
            IndexError,
            OSError,
        ) as error:
            raise UsageError(
                f"{file} has a pickle torch cannot read as data: "
                f"{type(error).__name__}: {_first_line(error)}"
            ) from None
        return tuple(name for name in scan.globals if name in found) or tuple(sorted(found))
    allowed = _allowed_globals(torch)
    return tuple(name for name in scan.globals if name not in allowed)


def _allowed_globals(torch: Any) -> set[str]:
    # Private in every torch release that has it; without it, trust nothing beyond the
    # few globals any state_dict needs, so the worst case is a refusal, never a load.
    unpickler = getattr(torch, "_weights_only_unpickler", None)
    allowed: set[str] = {
        "collections.OrderedDict",
        "torch._utils._rebuild_tensor_v2",
        "torch._utils._rebuild_parameter",
    }
    for getter in ("_get_allowed_globals", "_get_user_allowed_globals"):
        function = getattr(unpickler, getter, None)
        if function is not None:
            allowed |= set(function())
    return allowed


def _torch_load(file: Path, fmt: Format, *, weights_only: bool) -> tuple[Any, dict[int, str], bool]:
    torch = require_torch("torchdoctor ckpt")
    mmap = fmt is Format.TORCH_ZIP and "mmap" in inspect.signature(torch.load).parameters
    try:
        return (*_load_once(torch, file, weights_only, mmap), mmap)
    except UsageError:
        if not mmap:
            raise
    # A zip torch cannot map (an unusual writer, a file system without mmap) may still
    # read normally; a truly corrupt file fails again and reports why.
    return (*_load_once(torch, file, weights_only, False), False)


def _load_once(
    torch: Any, file: Path, weights_only: bool, mmap: bool
) -> tuple[Any, dict[int, str]]:
    locations: dict[int, str] = {}

    def record_location(storage: Any, location: str) -> Any:
        # Keep every storage on the CPU, where it was read, and remember where it came
        # from: no CUDA needed to inspect a checkpoint saved on a GPU.
        locations[storage.data_ptr()] = location
        return storage

    options: dict[str, Any] = {"mmap": True} if mmap else {}
    try:
        with _current_directory_importable(not weights_only):
            obj = torch.load(
                str(file), map_location=record_location, weights_only=weights_only, **options
            )
    except pickle.UnpicklingError as error:
        if weights_only:
            raise UsageError(
                f"{file} cannot be loaded with weights_only=True: {str(error).splitlines()[-1]}"
            ) from None
        raise UsageError(f"{file} is not a valid checkpoint pickle: {error}") from None
    except PermissionError as error:
        raise UsageError(f"{file} cannot be read: {error.strerror or error}") from None
    except MemoryError:
        raise UsageError(f"{file}: not enough memory to load it") from None
    except (RuntimeError, EOFError, ValueError, KeyError, OSError) as error:
        raise UsageError(
            f"{file} is truncated or corrupt: {type(error).__name__}: {_first_line(error)}"
        ) from None
    except (AttributeError, ImportError) as error:
        raise UsageError(
            f"{file} needs a class that is not importable here: {error}. Run "
            "from the directory of the code that saved it, or save a state_dict"
        ) from None
    except Exception as error:  # noqa: BLE001 - a trusted pickle runs arbitrary code
        if weights_only:
            raise
        raise UserCodeError(
            f"unpickling {file} raised {type(error).__name__}: {error}", original=error
        ) from None
    return obj, locations


@contextlib.contextmanager
def _current_directory_importable(wanted: bool) -> Iterator[None]:
    """A trusted pickle may name classes of the user's code: import them as ``python``
    would from here, with the current directory first on ``sys.path`` (the console
    script's own directory is there instead)."""
    cwd = os.getcwd()
    if not wanted or cwd in sys.path or "" in sys.path:
        yield
        return
    sys.path.insert(0, cwd)
    try:
        yield
    finally:
        if cwd in sys.path:
            sys.path.remove(cwd)


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else "(no message)"
