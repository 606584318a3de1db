"""Usable CPUs: affinity capped by a cgroup quota, read from v2 or v1 files."""

from __future__ import annotations

import os

import pytest

from torchdoctor.env.cpus import cgroup_cpu_quota, usable_cpus


def _write(root, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.mark.parametrize(
    "text, quota", [("max 100000\n", None), ("200000 100000\n", 2.0), ("150000 100000", 1.5)]
)
def test_cgroup_v2_quota(tmp_path, text, quota) -> None:
    _write(tmp_path, "sys/fs/cgroup/cpu.max", text)
    assert cgroup_cpu_quota(tmp_path) == quota


@pytest.mark.parametrize("quota_us, quota", [("-1", None), ("50000", 0.5)])
def test_cgroup_v1_quota(tmp_path, quota_us, quota) -> None:
    _write(tmp_path, "sys/fs/cgroup/cpu/cpu.cfs_quota_us", quota_us)
    _write(tmp_path, "sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000")
    assert cgroup_cpu_quota(tmp_path) == quota


def test_no_cgroup_files_means_no_quota(tmp_path) -> None:
    assert cgroup_cpu_quota(tmp_path) is None


def test_quota_caps_the_affinity_and_rounds_up(tmp_path) -> None:
    affinity = len(os.sched_getaffinity(0))
    assert usable_cpus(tmp_path) == affinity
    _write(tmp_path, "sys/fs/cgroup/cpu.max", "50000 100000")
    assert usable_cpus(tmp_path) == 1
    _write(tmp_path, "sys/fs/cgroup/cpu.max", f"{(affinity + 8) * 100000} 100000")
    assert usable_cpus(tmp_path) == affinity
