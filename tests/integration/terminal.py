"""Child processes started as a terminal starts them: with the default signal dispositions.

A suite run in the background (``nohup``, ``cmd &`` in a script, some CI runners)
inherits SIGINT and SIGHUP ignored, and so do the scripts it starts: one that sends
itself such a signal carries on and exits 0. The tests that check how a watched script
ends by a signal compare it with what a user sees, so they reset the three signals to
their defaults before running the command (an ``exec``, so the command is the process).
"""

from __future__ import annotations

import sys

_RESET_AND_EXEC = (
    "import os, signal, sys\n"
    "for number in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):\n"
    "    signal.signal(number, signal.SIG_DFL)\n"
    "os.execv(sys.argv[1], sys.argv[1:])\n"
)


def as_from_a_terminal(command: list[str]) -> list[str]:
    """``command`` (its first item an executable's path) run with SIGINT, SIGHUP and
    SIGTERM at their defaults."""
    return [sys.executable, "-c", _RESET_AND_EXEC, *command]
