"""The freed memory glibc's allocator keeps resident during a CPU training step.

The CPU allocator's peak (live tensors and kernel scratch) is not the process's resident
peak. torch's CPU allocator asks glibc for every block (``posix_memalign`` with 64-byte
alignment), and glibc serves a request from one of two places:

- a private mapping of its own (``mmap``), when the request is at least the *mmap
  threshold*; freeing it unmaps it, so its pages leave the resident size at once;
- the heap (``brk``) otherwise. A freed heap block stays resident: glibc returns only a
  free top of the heap to the system, and the small allocations made between a step's
  tensors (tensor and autograd objects) split its free blocks and pin its top.

The threshold starts at 128 KiB and is *dynamic*: freeing a mapped block larger than the
threshold, up to 32 MiB (``DEFAULT_MMAP_THRESHOLD_MAX`` on 64-bit), raises it to that
block's size. After the first steps of a training loop, then, every block up to the largest
block the step frees (at most 32 MiB) comes from the heap.

The model: at its peak the process holds the step's live blocks plus, in freed heap, as much
as the step's transient heap blocks (those it allocates and frees itself, served from the
heap under the raised threshold) took at their own peak, because the previous step (or the
first, laid out under the lower threshold) left that much free heap that the split and pinned
blocks cannot give back. The forward and backward's blocks are shaped by the batch, the
optimizer's by the parameters: freed blocks of one are not the sizes the other asks for,
so each phase keeps its own peak and the two add. Blocks alive across steps (parameters,
gradients, optimizer state, the batch) leave nothing free behind; blocks above the
threshold are returned when freed.
Where glibc does not raise the threshold (``MALLOC_MMAP_THRESHOLD_`` set, or another
allocator preloaded) the model does not hold; see docs/forecast.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["mmap_threshold", "retained_bytes"]

_PAGE = 4096
_THRESHOLD_START = 128 * 2**10  # glibc's DEFAULT_MMAP_THRESHOLD_MIN
_THRESHOLD_MAX = 32 * 2**20  # glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit
_HEADER = 8  # a chunk's size field
_ALIGNMENT = 64  # torch's CPU allocator: posix_memalign(64, n)
_MIN_CHUNK = 32


def _request(size: int) -> int:
    """What ``_int_malloc`` is asked for when torch allocates ``size`` bytes:
    ``posix_memalign`` asks for the aligned chunk size plus the alignment and a minimum
    chunk, to cut an aligned chunk out of it."""
    chunk = max(_MIN_CHUNK, -(-(size + _HEADER) // 16) * 16)
    return chunk + _ALIGNMENT + _MIN_CHUNK


def _mapped_size(size: int) -> int:
    """The size of the mapping glibc makes for ``size`` bytes: whole pages."""
    return -(-(_request(size) + _HEADER) // _PAGE) * _PAGE


def mmap_threshold(freed: Iterable[int]) -> int:
    """glibc's mmap threshold once blocks of the sizes ``freed`` have been freed (each at
    least once, as mapped blocks): it rises to each freed mapping larger than it, up to
    32 MiB, and never falls."""
    threshold = _THRESHOLD_START
    for size in sorted(set(freed)):
        mapped = _mapped_size(size)
        if _request(size) >= threshold and threshold < mapped <= _THRESHOLD_MAX:
            threshold = mapped
    return threshold


def retained_bytes(events: Sequence[tuple[Any, int]]) -> int:
    """The freed heap bytes the process keeps at the peak of a step: the peak of the
    step's transient blocks that come from the heap, for each phase, added up.

    ``events`` are a step's allocations (``(entry, 1)``) and frees (``(entry, -1)``) in
    order, ``entry.bytes`` each block's size, with ``(None, 0)`` where the optimizer's
    phase starts (:attr:`~torchdoctor.preflight.memory.LiveBytes.events`).
    """
    blocks = [(entry, sign) for entry, sign in events if entry is not None]
    allocated = {id(entry) for entry, sign in blocks if sign > 0}
    transient = {id(entry) for entry, sign in blocks if sign < 0 and id(entry) in allocated}
    threshold = mmap_threshold(entry.bytes for entry, sign in blocks if sign < 0)
    live = peak = kept = 0
    for entry, sign in events:
        if entry is None:  # a new phase: the last one's peak stays kept
            kept, peak = kept + peak, live
        elif id(entry) in transient and _request(entry.bytes) < threshold:
            live += sign * entry.bytes
            peak = max(peak, live)
    return kept + peak
