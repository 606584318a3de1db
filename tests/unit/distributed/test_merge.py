"""Merging the parts of a multi-process job into one report (no torch, no processes)."""

from __future__ import annotations

import json
from pathlib import Path

from torchdoctor.distributed.merge import Part, describe_ranks, merge_parts, read_parts
from torchdoctor.findings import Depth, Location, Report
from torchdoctor.report.json import render_json, report_from_json
from torchdoctor.report.options import RenderOptions
from torchdoctor.rules.registry import finding


def _report(*codes: str, steps: int = 3, line: int = 10) -> Report:
    report = Report(command="run", facts={"steps": steps})
    for code in codes:
        report.add(
            finding(code, f"{code} seen", Location(path="/x/train.py", line=line), Depth.RUN)
        )
    return report


def test_same_finding_on_every_rank_is_one_finding_with_all_ranks() -> None:
    parts = [Part(_report("TD201"), rank, 2, 100 + rank) for rank in (0, 1)]
    merged = merge_parts(Report(command="run"), parts)
    (only,) = merged.findings
    assert only.ranks == (0, 1)
    assert only.message.endswith("(all 2 ranks)")
    assert merged.facts["world_size"] == 2
    assert merged.facts["steps"] == 3
    assert set(merged.facts["ranks"]) == {"0", "1"}


def test_a_finding_of_some_ranks_names_them() -> None:
    parts = [
        Part(_report("TD201") if rank in (1, 3) else _report(), rank, 4, rank) for rank in range(4)
    ]
    merged = merge_parts(Report(command="run"), parts)
    (only,) = merged.findings
    assert only.ranks == (1, 3)
    assert "(ranks 1, 3 of 4)" in only.message


def test_parts_of_processes_that_did_nothing_are_left_out() -> None:
    base = _report("TD201")
    merged = merge_parts(base, [Part(_report(steps=0), None, None, 5)])
    assert merged is base
    assert "world_size" not in merged.facts


def test_single_process_findings_carry_no_ranks() -> None:
    merged = merge_parts(Report(command="run"), [Part(_report("TD201"), None, None, 7)])
    (only,) = merged.findings
    assert only.ranks == (0,)
    assert "rank" not in only.message  # one process: nothing to say about ranks


def test_parts_without_rank_are_numbered_after_known_ranks() -> None:
    parts = [Part(_report("TD201"), None, None, 9), Part(_report("TD201"), 0, None, 3)]
    merged = merge_parts(Report(command="run"), parts)
    assert merged.findings[0].ranks == (0, 1)


def test_a_rank_that_wrote_nothing_is_listed_missing() -> None:
    merged = merge_parts(
        Report(command="run"), [Part(_report("TD201"), 0, 3, 1), Part(_report(), 2, 3, 2)]
    )
    assert merged.facts["missing_ranks"] == [1]
    assert "(rank 0 of 3)" in merged.findings[0].message


def test_checkpoint_by_one_rank_is_dropped_by_several_kept() -> None:
    one = merge_parts(
        Report(command="run"), [Part(_report("TD804"), 0, 2, 1), Part(_report(), 1, 2, 2)]
    )
    assert not one.findings
    both = merge_parts(Report(command="run"), [Part(_report("TD804"), r, 2, r) for r in (0, 1)])
    assert both.codes() == {"TD804"}


def test_ranks_survive_json_and_are_absent_when_empty() -> None:
    parts = [Part(_report("TD201"), rank, 2, rank) for rank in (0, 1)]
    merged = merge_parts(Report(command="run"), parts)
    text = render_json(merged, RenderOptions())
    data = json.loads(text)
    assert data["findings"][0]["ranks"] == [0, 1]
    assert data["facts"]["world_size"] == 2
    assert report_from_json(text).findings[0].ranks == (0, 1)
    single = json.loads(render_json(_report("TD201"), RenderOptions()))
    assert "ranks" not in single["findings"][0]


def test_read_parts_skips_unreadable_files(tmp_path: Path) -> None:
    good = tmp_path / "part-1.json"
    from torchdoctor.report.json import report_to_dict

    good.write_text(
        json.dumps(
            {
                "meta": {"pid": 1, "rank": 1, "world_size": 2},
                "report": report_to_dict(_report("TD201")),
            }
        )
    )
    (tmp_path / "part-2.json").write_text("{not json")
    (tmp_path / "part-3.json").write_text(json.dumps({"meta": {}}))
    parts = read_parts(sorted(tmp_path.glob("part-*.json")))
    assert [(p.rank, p.world_size, p.pid) for p in parts] == [(1, 2, 1)]


def test_describe_ranks() -> None:
    assert describe_ranks([0, 1], 2) == "all 2 ranks"
    assert describe_ranks([2], 4) == "rank 2 of 4"
    assert describe_ranks([3, 1], 4) == "ranks 1, 3 of 4"
