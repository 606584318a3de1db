"""How many intra-op threads the check's own passes use: the user's, or one.

torch runs each op on all the threads it was given. For the small models that dominate
``check``'s work (a few dozen steps on one batch) every op is over in microseconds, and on
a machine whose cores are busy with other processes each op then waits for a descheduled
thread: a check that takes half a second single-threaded took twenty, all of it CPU time
spent waiting. Large models do benefit from threads. So :func:`fastest_thread_count`
times the model's forward both ways and the probes run with the faster setting. The
thread count changes how fast the check runs, never what it finds: every comparison a
probe makes (two seeded runs, two eval forwards) is between passes run the same way. The
engine's snapshot restores the user's setting after every probe.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torchdoctor.preflight.context import CheckContext

__all__ = ["fastest_thread_count"]

TRIALS = 2  # forwards timed per setting; the fastest of each counts
# The user's threads must make the forward at least this much faster to be used. The
# risks are lopsided: one thread where several would help costs at most their speed-up,
# while several threads meeting busy cores later in the check cost ten to fifty times.
THREADS_GAIN = 1.5


def fastest_thread_count(ctx: CheckContext) -> int:
    """1 or the user's ``torch.get_num_threads()``: the user's when they run an eval
    forward of the first batch :data:`THREADS_GAIN` times faster than one thread does now,
    when the model does not run on the CPU, or when the forward fails (the probes then
    report why); else 1."""
    import torch

    user = torch.get_num_threads()
    if user == 1:
        return user
    best = {user: float("inf"), 1: float("inf")}
    try:
        if ctx.device.type != "cpu":
            return user
        for _ in range(TRIALS):
            for count in (user, 1):
                torch.set_num_threads(count)
                begin = time.perf_counter()
                ctx.forward(ctx.model, train=False, grad=False)
                best[count] = min(best[count], time.perf_counter() - begin)
    except Exception:  # noqa: BLE001 - the probes meet the same failure and explain it
        return user
    finally:
        torch.set_num_threads(user)
    return user if best[user] * THREADS_GAIN <= best[1] else 1
