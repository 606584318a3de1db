"""Correct DDP programs run as real 2-rank gloo jobs draw no warning (clean corpus).

``tests/corpus/clean/ddp_*.py`` use DistributedSampler with ``set_epoch``, rank-0 saving,
all-reduced logging, ``no_sync`` accumulation, BatchNorm with broadcast buffers, a real
need for ``find_unused_parameters`` and ``join()`` for uneven inputs. Each runs as
``torchdoctor run --nproc-per-node 2`` would, with a timeout that kills the whole job.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from torchdoctor.findings import Severity

pytestmark = [pytest.mark.slow, pytest.mark.needs_torch]

CLEAN = Path(__file__).resolve().parents[1] / "corpus" / "clean"
PROGRAMS = sorted(CLEAN.glob("ddp_*.py"))
JOB_TIMEOUT_S = 240
# Rules of the distributed topic must not fire at all on these, not even as information.
DISTRIBUTED_CODES = ("TD80", "TD81", "TD82")


def test_there_are_enough_ddp_programs() -> None:
    assert len(PROGRAMS) >= 7


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.stem)
def test_ddp_program_is_quiet_on_two_ranks(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from torchdoctor.distributed.job import launch

    monkeypatch.chdir(path.parent)
    result = launch(str(path), [], 2, timeout=JOB_TIMEOUT_S)
    report = result.report
    described = "\n".join(f"  {f.code} {f.location}: {f.message}" for f in report.findings)
    assert result.exit_status == 0, f"{path.name} failed:\n{described}"
    assert report.facts["world_size"] == 2
    assert all(rank.get("steps") for rank in report.facts["ranks"].values()), report.facts
    loud = [f for f in report.findings if f.severity >= Severity.WARNING]
    ours = [f for f in report.findings if f.code.startswith(DISTRIBUTED_CODES)]
    assert not loud and not ours, f"{path.name} draws findings:\n{described}"
    assert report.facts.get("cross_rank_checks", 0) >= 2, report.facts  # the ranks compared
