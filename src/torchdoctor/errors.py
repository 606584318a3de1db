"""Errors torchdoctor raises on purpose. Each carries a message fit to show a user as is.

Every one of them is a :class:`TorchDoctorError`, so ``except torchdoctor.TorchDoctorError``
catches whatever torchdoctor raises on purpose; anything else is a bug of ours.
"""

from __future__ import annotations

__all__ = [
    "TorchDoctorError",
    "TorchMissingError",
    "UnknownFormatError",
    "UnknownRuleError",
    "UsageError",
    "UserCodeError",
]


class TorchDoctorError(Exception):
    """Base class: a problem the user can act on. The CLI prints it and exits with 2."""


class UsageError(TorchDoctorError):
    """Bad input: a missing file, a malformed target, an option that makes no sense."""


class TorchMissingError(TorchDoctorError):
    """The command needs PyTorch and it is not installed."""


class UnknownRuleError(TorchDoctorError, KeyError):
    """A code (or name) that is not in the catalogue.

    Also a :class:`KeyError`, as a failed look-up in the code table.
    """

    def __str__(self) -> str:
        # KeyError quotes its argument; this is a message for a user.
        return str(self.args[0]) if self.args else ""


class UnknownFormatError(UsageError, ValueError):
    """The requested output format does not exist.

    Also a :class:`ValueError`, as before it joined the hierarchy.
    """


class UserCodeError(TorchDoctorError):
    """The user's own code (a factory, a forward, a script) raised.

    Attributes:
        original: the exception the user's code raised.
        where: ``file:line`` in the user's code where it was raised, when known.
    """

    def __init__(
        self, message: str, original: BaseException | None = None, where: str | None = None
    ) -> None:
        super().__init__(message)
        self.original = original
        self.where = where
