"""What a call or an attribute does with a value: train on it, summarise it, or make a
new value from it. The vocabulary :mod:`.destinations` follows values with.

Each function answers with a :class:`Destination`, or ``None`` when the result is a new
value made from the given one (``x.mean()``, ``torch.cat([x])``), whose way must be
followed further.
"""

from __future__ import annotations

import ast
import enum

from torchdoctor.static import torchapi

__all__ = [
    "CONTAINER_FILLS",
    "Destination",
    "Reach",
    "attribute_use",
    "builtin_use",
    "method_use",
    "qualified_use",
    "receiver_use",
]


class Destination(enum.IntEnum):
    """Where a value ends, weakest first (a value's answer is its strongest place)."""

    UNUSED = 0
    SUMMARY = 1
    UNKNOWN = 2
    TRAINING = 3


Reach = tuple[Destination, ast.AST | None]
"""A destination and the node where it was decided (the model call, the ``print``)."""

# value.<method>(...): what calling it on the value means.
_RECEIVER_SUMMARY = frozenset({"item", "tolist", "numpy"})
_RECEIVER_TRAINING = frozenset({"backward", "requires_grad_", "retain_grad"})
CONTAINER_FILLS = frozenset({"append", "extend", "insert", "appendleft"})
_METADATA = frozenset(
    {"shape", "dtype", "device", "ndim", "is_cuda", "requires_grad", "layout", "names"}
)
# f(value): functions and methods that only read a value out, or train on it.
_SUMMARY_BUILTINS = frozenset(
    {
        "print",
        "str",
        "repr",
        "format",
        "float",
        "int",
        "bool",
        "round",
        "len",
        "isinstance",
        "type",
        "id",
        "hash",
    }
)
_DERIVING_BUILTINS = frozenset(
    {
        "sum",
        "min",
        "max",
        "sorted",
        "list",
        "tuple",
        "abs",
        "zip",
        "enumerate",
        "iter",
        "next",
        "reversed",
    }
)
_SUMMARY_METHODS = frozenset(
    {
        "info",
        "debug",
        "warning",
        "warn",
        "error",
        "exception",
        "critical",
        "log",
        "log_metrics",
        "log_dict",
        "add_scalar",
        "add_scalars",
        "add_histogram",
        "set_postfix",
        "set_description",
        "write",
        "update",
        "copy_",
    }
)  # copy_ casts to the receiver's dtype
_SUMMARY_ROOTS = ("numpy.", "math.", "statistics.", "logging.", "json.")
_SUMMARY_TORCH = frozenset(
    {
        "torch.allclose",
        "torch.isclose",
        "torch.equal",
        "torch.save",
        "torch.testing.assert_close",
        "torch.testing.assert_allclose",
    }
)
_TRAINING_METHODS = frozenset(
    {
        "register_buffer",
        "register_parameter",
        "add_param_group",
        "forward",
        "backward",
        "manual_backward",
    }
)
_TRAINING_TORCH = frozenset(
    {
        "torch.nn.Parameter",
        "torch.nn.parameter.Parameter",
        "torch.nn.Buffer",
        "torch.autograd.backward",
        "torch.autograd.grad",
    }
)
_FUNCTIONAL_LOSSES = frozenset(
    {
        "cross_entropy",
        "nll_loss",
        "binary_cross_entropy",
        "binary_cross_entropy_with_logits",
        "kl_div",
        "poisson_nll_loss",
        "gaussian_nll_loss",
        "ctc_loss",
        "triplet_margin_loss",
    }
)


def receiver_use(method: str) -> Destination | None:
    """``value.method(...)``: ``.item()`` summarises, ``.backward()`` trains, ``.append()``
    fills a list (the value is not read); ``None``: a new value (``.mean()``, ``.to()``)."""
    if method in _RECEIVER_SUMMARY:
        return Destination.SUMMARY
    if method in _RECEIVER_TRAINING:
        return Destination.TRAINING
    if method in CONTAINER_FILLS:
        return Destination.UNUSED
    return None


def attribute_use(attribute: str) -> Destination | None:
    """``value.attr``: metadata (``.shape``, ``.dtype``) is a summary; ``None``: a value."""
    return Destination.SUMMARY if attribute in _METADATA else None


def builtin_use(name: str) -> Destination | None:
    """``name(value)`` for a builtin: ``print``/``float`` summarise, ``sum``/``zip`` make a
    value (``None``); anything else is :attr:`Destination.UNKNOWN`."""
    if name in _SUMMARY_BUILTINS:
        return Destination.SUMMARY
    return None if name in _DERIVING_BUILTINS else Destination.UNKNOWN


def method_use(method: str) -> Destination | None:
    """``obj.method(value)``: a logger or writer summarises, ``register_buffer`` and
    ``forward`` train; ``None`` when the method name says nothing."""
    if method in _TRAINING_METHODS:
        return Destination.TRAINING
    if method in _SUMMARY_METHODS:
        return Destination.SUMMARY
    return None


def qualified_use(qualified: str) -> Destination | None:
    """``f(value)`` for a function known by its qualified name: ``nn.Parameter``, an
    optimizer or a loss trains; NumPy, ``math`` and loggers summarise; other torch
    functions (``torch.cat``, ``TensorDataset``) and einops' make a value (``None``); a
    sampler's arguments only choose examples (a summary)."""
    if qualified.startswith("einops."):
        return None  # rearrange, repeat, pack, unpack: the same values, reshaped
    if not qualified.startswith("torch."):
        last = qualified.rpartition(".")[2]
        if (
            qualified.startswith(_SUMMARY_ROOTS)
            or last in _SUMMARY_METHODS
            or last.startswith("log")
        ):
            return Destination.SUMMARY
        return Destination.UNKNOWN
    if qualified in _SUMMARY_TORCH or torchapi.in_family(qualified, torchapi.SAMPLER):
        # A sampler's weights and indices choose which examples are read: they never
        # become the data, whatever their dtype (WeightedRandomSampler casts to float64).
        return Destination.SUMMARY
    if qualified in _TRAINING_TORCH or any(
        torchapi.in_family(qualified, family) for family in (torchapi.OPTIMIZER, torchapi.LOSS)
    ):
        return Destination.TRAINING
    if qualified.startswith("torch.nn.functional."):
        last = qualified.rpartition(".")[2]
        if last in _FUNCTIONAL_LOSSES or last.endswith("_loss"):
            return Destination.TRAINING
    return None
