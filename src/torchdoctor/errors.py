"""Errors torchdoctor raises on purpose. Each carries a message fit to show a user as is."""

from __future__ import annotations

__all__ = ["TorchDoctorError", "TorchMissingError", "UsageError", "UserCodeError"]


class TorchDoctorError(Exception):
    """Base class: a problem the user can act on. The CLI prints it and exits with 2."""


class UsageError(TorchDoctorError):
    """Bad input: a missing file, a malformed target, an option that makes no sense."""


class TorchMissingError(TorchDoctorError):
    """The command needs PyTorch and it is not installed."""


class UserCodeError(TorchDoctorError):
    """The user's own code (a factory, a forward, a script) raised.

    Attributes:
        original: the exception the user's code raised.
        where: ``file:line`` in the user's code where it was raised, when known.
    """

    def __init__(self, message: str, original: BaseException | None = None,
                 where: str | None = None) -> None:
        super().__init__(message)
        self.original = original
        self.where = where
