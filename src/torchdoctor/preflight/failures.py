"""The user's code failing: where it failed, and whether a rule explains it.

:func:`call_user` runs a piece of the user's code (a factory, a forward, a loss) and turns
its exceptions into :class:`~torchdoctor.errors.UserCodeError` naming the stage, the error
and the user's own ``file:line``; it and the classifier of user frames live in
:mod:`torchdoctor._usercode`, shared by every depth, and are re-exported here.
:class:`SharedWorkFailed` is what a probe sees when shared work failed for a reason a rule
explains (a device mismatch, a wrong target dtype): the engine reports that finding
instead of aborting the check.
"""

from __future__ import annotations

import traceback

from torchdoctor._usercode import (
    call_user,
    error_location,
    is_out_of_memory,
    user_code_error,
    user_frame_summary,
)
from torchdoctor.findings import Finding

__all__ = [
    "SharedWorkFailed",
    "call_user",
    "error_location",
    "is_out_of_memory",
    "user_code_error",
    "user_frame",
]


class SharedWorkFailed(Exception):  # noqa: N818 - a signal between context and engine
    """Shared work failed for a reason a rule explains; carries that rule's finding."""

    def __init__(self, finding: Finding) -> None:
        super().__init__(finding.message)
        self.finding = finding


def user_frame(
    frames: list[traceback.FrameSummary], *, inside_model: bool = False
) -> traceback.FrameSummary | None:
    """The innermost frame that belongs to the user's code (the one classifier,
    :func:`torchdoctor._usercode.user_frame_summary`).

    With ``inside_model``, only frames below the first ``nn.Module`` call count: a full
    stack also holds the callers of the model (a test runner, a CLI), which are not where
    a value was computed.
    """
    return user_frame_summary(frames, inside_model=inside_model)
