"""Judging a hung job from the ranks' records (no processes, no waiting)."""

from __future__ import annotations

import traceback
from pathlib import Path

from torchdoctor.distributed.hang import (
    Watchdog,
    _collective,
    hang_findings,
    hang_records,
    job_is_hung,
)


def _record(rank: int, collective: str | None, line: int = 10) -> dict[str, object]:
    return {
        "rank": rank,
        "step": 5,
        "collective": collective,
        "path": "/job/train.py",
        "line": line,
        "waited_s": 301.0,
        "stack": [],
        "stacks_file": f"/s/{rank}.txt",
    }


def test_the_rank_outside_collectives_is_named_as_the_cause() -> None:
    findings = hang_findings([_record(0, "torch.distributed.all_reduce", 20), _record(1, None)], 2)
    stuck, waiting = sorted(findings, key=lambda f: f.ranks)[::-1]
    assert stuck.ranks == (1,) and "Rank 1 stopped making progress" in stuck.message
    assert "rank 0 in `torch.distributed.all_reduce`" in stuck.message
    assert waiting.ranks == (0,) and "for rank 1" in waiting.message
    assert (waiting.location.path, waiting.location.line) == ("/job/train.py", 20)
    assert {f.code for f in findings} == {"TD813"}


def test_a_rank_that_never_reported_is_the_one_waited_for() -> None:
    (only,) = hang_findings([_record(0, "torch.distributed.barrier")], 3)
    assert "for rank 1, rank 2" in only.message


def test_a_job_is_hung_only_when_some_rank_waits_in_a_collective() -> None:
    busy = [_record(0, None), _record(1, None)]
    assert not job_is_hung(busy, 2, first_seen=0.0, now=10_000.0)  # slow, not hung
    waiting = [_record(0, "torch.distributed.all_reduce"), _record(1, None)]
    assert job_is_hung(waiting, 2, first_seen=0.0, now=0.0)  # every rank reported
    alone = waiting[:1]
    assert not job_is_hung(alone, 2, first_seen=0.0, now=1.0)
    assert job_is_hung(alone, 2, first_seen=0.0, now=10_000.0)  # after the grace period


def test_collectives_are_recognised_from_the_stack() -> None:
    def frame(filename: str, name: str) -> traceback.FrameSummary:
        return traceback.FrameSummary(filename, 1, name)

    user = frame("/job/train.py", "main")
    c10d = frame("/venv/torch/distributed/distributed_c10d.py", "all_reduce")
    wrapper = frame("/venv/torch/distributed/c10d_logger.py", "_wrapper")
    backward = frame("/venv/torch/autograd/__init__.py", "backward")
    assert _collective([user, c10d, wrapper]) == "torch.distributed.all_reduce"
    assert _collective([user, backward]) == "backward (DDP's gradient all-reduce)"
    assert _collective([user, frame("/usr/lib/python3.11/queue.py", "get")]) is None


def test_records_are_read_back_by_rank(tmp_path: Path) -> None:
    import json

    (tmp_path / "hang-rank1.json").write_text(json.dumps(_record(1, None)))
    (tmp_path / "hang-rank0.json").write_text(json.dumps(_record(0, "x")))
    (tmp_path / "hang-rank2.json").write_text("{broken")
    assert [r["rank"] for r in hang_records(tmp_path)] == [0, 1]


def test_a_watchdog_that_sees_progress_stays_quiet(tmp_path: Path) -> None:
    watchdog = Watchdog(0, tmp_path, lambda frame: None, timeout_s=3600)
    watchdog.progress(1)
    watchdog.stop()
    assert not watchdog.fired and not list(tmp_path.iterdir())


def test_a_stalled_rank_writes_its_record_and_stacks(tmp_path: Path) -> None:
    watchdog = Watchdog(3, tmp_path, lambda frame: ("/job/train.py", 7), timeout_s=3600)
    watchdog.progress(4)
    watchdog._record()  # what the thread does once the timeout has passed
    watchdog.stop()
    (record,) = hang_records(tmp_path)
    assert record["rank"] == 3 and record["step"] == 4 and record["line"] == 7
    assert (tmp_path / "stacks-rank3.txt").read_text().strip()
