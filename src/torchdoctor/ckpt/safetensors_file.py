"""safetensors files, read lazily through the ``safetensors`` package when it is installed.

A safetensors file is a JSON header (names, dtypes, shapes, offsets) followed by raw bytes,
so it never runs code. Shapes and dtypes come from the header; a tensor's values are read
only when asked for, one tensor at a time, so inspecting a large file needs little memory.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from torchdoctor.errors import UsageError

__all__ = ["SafetensorsFile", "open_safetensors", "save_safetensors"]

_INSTALL_HINT = "install it with `pip install 'torchdoctor[safetensors]'`"

# safetensors dtype codes -> torch dtype names.
_DTYPES = {
    "F64": "float64",
    "F32": "float32",
    "F16": "float16",
    "BF16": "bfloat16",
    "I64": "int64",
    "I32": "int32",
    "I16": "int16",
    "I8": "int8",
    "U8": "uint8",
    "U16": "uint16",
    "U32": "uint32",
    "U64": "uint64",
    "BOOL": "bool",
    "F8_E4M3": "float8_e4m3fn",
    "F8_E5M2": "float8_e5m2",
    "C64": "complex64",
}


class SafetensorsFile(Mapping[str, Any]):
    """A read-only mapping from tensor name to tensor, loading each value on access.

    :meth:`describe` gives a tensor's shape and dtype from the header without reading it.
    """

    def __init__(self, path: Path, handle: Any) -> None:
        self.path = path
        self._handle = handle
        self._keys = tuple(handle.keys())
        self.metadata: dict[str, str] = dict(handle.metadata() or {})

    def __getitem__(self, key: str) -> Any:
        if key not in self._keys:
            raise KeyError(key)
        return self._handle.get_tensor(key)

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def describe(self, key: str) -> tuple[tuple[int, ...], str]:
        """``(shape, dtype name)`` of one tensor, read from the header only."""
        view = self._handle.get_slice(key)
        code = str(view.get_dtype())
        return tuple(int(n) for n in view.get_shape()), _DTYPES.get(code, code.lower())


def _safetensors() -> Any:
    try:
        import safetensors
    except ImportError:
        raise UsageError(
            f"reading .safetensors files needs the safetensors package; {_INSTALL_HINT}"
        ) from None
    return safetensors


def open_safetensors(path: Path) -> SafetensorsFile:
    """Open ``path`` for lazy reading.

    Raises:
        UsageError: the package is missing, or the file is not a valid safetensors file.
    """
    safetensors = _safetensors()
    try:
        handle = safetensors.safe_open(str(path), framework="pt")
    except Exception as error:  # noqa: BLE001 - the Rust reader raises its own types
        raise UsageError(f"{path} is not a readable safetensors file: {error}") from None
    return SafetensorsFile(path, handle)


def save_safetensors(
    tensors: Mapping[str, Any], path: Path, metadata: Mapping[str, str] | None = None
) -> None:
    """Write ``tensors`` to ``path`` in the safetensors format."""
    _safetensors()
    from safetensors.torch import save_file

    contiguous = {key: value.contiguous() for key, value in tensors.items()}
    save_file(contiguous, str(path), metadata=dict(metadata or {}) or None)
