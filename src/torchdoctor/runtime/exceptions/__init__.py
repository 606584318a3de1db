"""The exception explainer: known PyTorch errors, what they mean, where, and how to fix them.

:func:`explain_exception` turns the exception that ended a training run into one
:class:`~torchdoctor.findings.Finding`. :data:`KNOWN_ERRORS` is the table of recognised
messages; :mod:`~torchdoctor.runtime.exceptions.frames` finds the user's own line and the
running module's path, and is shared with the warnings detector.
"""

from __future__ import annotations

from torchdoctor.runtime.exceptions.catalogue import KNOWN_ERRORS, KnownError, match_known_error
from torchdoctor.runtime.exceptions.explain import GENERIC_CODE, explain_exception

__all__ = ["GENERIC_CODE", "KNOWN_ERRORS", "KnownError", "explain_exception", "match_known_error"]
