"""How many CPUs a process may really use: its affinity, capped by a cgroup CPU quota.

``os.cpu_count()`` counts the machine's CPUs. In a container limited with ``--cpus=4`` or a
Kubernetes CPU limit, the process still sees every CPU of the host, but the kernel lets it
run only ``quota / period`` CPUs' worth of time; more threads than that spend their time
throttled.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

__all__ = ["cgroup_cpu_quota", "usable_cpus"]

_CGROUP_V2 = Path("/sys/fs/cgroup/cpu.max")
_CGROUP_V1 = (
    Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"),
    Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us"),
)


def usable_cpus(root: Path | None = None) -> int | None:
    """CPUs this process can use, or ``None`` when unknown.

    Args:
        root: directory standing in for ``/`` (tests); the real file system by default.
    """
    try:
        affinity: int | None = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # macOS and Windows have no sched_getaffinity
        affinity = os.cpu_count()
    quota = cgroup_cpu_quota(root)
    if quota is None:
        return affinity
    limit = max(1, math.ceil(quota))
    return limit if affinity is None else min(affinity, limit)


def cgroup_cpu_quota(root: Path | None = None) -> float | None:
    """The cgroup CPU limit in CPUs (``2.5`` for 250 ms per 100 ms), ``None`` if unlimited."""
    base = root or Path("/")
    v2 = base / _CGROUP_V2.relative_to("/")
    try:
        if v2.is_file():
            quota, _, period = v2.read_text().strip().partition(" ")
            return None if quota == "max" else int(quota) / int(period or 100000)
        quota_file, period_file = (base / p.relative_to("/") for p in _CGROUP_V1)
        if quota_file.is_file() and period_file.is_file():
            quota_us = int(quota_file.read_text())
            return None if quota_us <= 0 else quota_us / int(period_file.read_text())
    except (OSError, ValueError, ZeroDivisionError):
        return None
    return None
