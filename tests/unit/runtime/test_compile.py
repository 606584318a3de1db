"""torch.compile facts: graph breaks (TD707) and repeated recompilations (TD708).

Compiled with ``backend="eager"`` so no C++ compiler is needed; dynamo's start-up makes
these tests slow.
"""

from __future__ import annotations

import sys
import traceback
import types
from pathlib import Path

import pytest

pytestmark = [pytest.mark.needs_torch, pytest.mark.slow]
torch = pytest.importorskip("torch")

import torchdoctor  # noqa: E402
from torchdoctor.runtime.detectors.compile import (  # noqa: E402
    graph_break_finding,
    graph_breaks,
    recompilation_finding,
    recompilations,
    snapshot,
)
from torchdoctor.runtime.exceptions.compile_reasons import graph_break_advice  # noqa: E402

HERE = str(Path(__file__).resolve())


def line_of(marker: str) -> int:
    lines = Path(HERE).read_text(encoding="utf-8").splitlines()
    return next(i for i, text in enumerate(lines, 1) if text.rstrip().endswith(f"# {marker}"))


def scale_and_log(x: torch.Tensor) -> torch.Tensor:
    y = x * 2
    print("scaled", end="")  # graph-break
    return y + 1


def traceable(x: torch.Tensor) -> torch.Tensor:
    return (x * 2).relu().sum(-1)


def test_a_print_in_compiled_code_is_a_graph_break_at_its_line(capsys) -> None:
    since = snapshot()
    torch.compile(scale_and_log, backend="eager")(torch.randn(3))
    [found] = [b for b in graph_breaks(since) if b.frame and b.frame.path == HERE]
    assert found.frame.line == line_of("graph-break")
    result = graph_break_finding(found)
    assert result.code == "TD707" and result.location.line == line_of("graph-break")
    assert "a `print` call" in result.message and "print" in result.fix_hint
    capsys.readouterr()


def test_a_fully_traceable_function_has_no_graph_break() -> None:
    since = snapshot()
    torch.compile(traceable, backend="eager")(torch.randn(2, 3))
    assert graph_breaks(since) == []


def test_breaks_recorded_before_the_snapshot_are_not_counted(capsys) -> None:
    torch.compile(scale_and_log, backend="eager")(torch.randn(5))
    since = snapshot()
    assert graph_breaks(since) == []
    capsys.readouterr()


def test_breaks_inside_torchdoctor_are_never_blamed_on_the_user(monkeypatch) -> None:
    import torch._dynamo.utils as dynamo_utils

    ours = str(Path(torchdoctor.__file__).parent / "runtime" / "events.py")
    record = types.SimpleNamespace(
        reason="call_function in a hook", user_stack=[traceback.FrameSummary(ours, 10, "_discover")]
    )
    since = snapshot()
    monkeypatch.setattr(
        dynamo_utils, "graph_break_reasons", [*dynamo_utils.graph_break_reasons, record]
    )
    assert graph_breaks(since) == []


def test_no_dynamo_loaded_means_nothing_to_report(monkeypatch) -> None:
    monkeypatch.delitem(sys.modules, "torch._dynamo.utils")
    assert graph_breaks(snapshot()) == [] and recompilations(snapshot()) == []


def test_changing_shapes_with_dynamic_false_recompile_up_to_the_limit() -> None:
    def pool(x: torch.Tensor) -> torch.Tensor:
        return x.mean(1)

    compiled = torch.compile(pool, backend="eager", dynamic=False)
    since = snapshot()
    for length in range(5, 15):
        compiled(torch.randn(2, length))
    [item] = [r for r in recompilations(since) if r.function == "pool"]
    assert item.limit_hit and item.count == item.limit
    result = recompilation_finding(item)
    assert result is not None and result.code == "TD708"
    assert "the input shapes change" in result.message and "runs uncompiled" in result.message
    assert "mark_dynamic" in result.fix_hint


def test_automatic_dynamic_shapes_recompile_once_and_stay_quiet() -> None:
    def pool(x: torch.Tensor) -> torch.Tensor:
        return x.mean(1)

    compiled = torch.compile(pool, backend="eager")
    since = snapshot()
    for length in range(5, 15):
        compiled(torch.randn(2, length))
    items = [r for r in recompilations(since) if r.function == "pool"]
    assert all(item.count <= 1 for item in items)
    assert all(recompilation_finding(item) is None for item in items)


def test_train_eval_switch_is_not_repeated_recompilation() -> None:
    def head(x: torch.Tensor) -> torch.Tensor:
        return x.sum()

    compiled = torch.compile(head, backend="eager")
    since = snapshot()
    for _ in range(3):
        compiled(torch.randn(3, requires_grad=True))
        with torch.no_grad():
            compiled(torch.randn(3))
    assert all(recompilation_finding(r) is None for r in recompilations(since))


def test_cryptic_reasons_of_older_torch_get_plain_words() -> None:
    advice = graph_break_advice("generic_jump TensorVariable()")
    assert advice is not None and "data-dependent control flow" in advice.meaning
    assert graph_break_advice("call_method UserDefinedObjectVariable(foo) bar") is None


def test_the_watch_reports_graph_breaks_of_the_run(capsys) -> None:
    def shift_and_log(x: torch.Tensor) -> torch.Tensor:
        y = x - 1
        print("shifted", end="")  # watched-break
        return y * 3

    compiled = torch.compile(shift_and_log, backend="eager")
    with torchdoctor.watch() as session:
        compiled(torch.randn(7))
    [found] = session.report.by_code("TD707")
    assert found.location.line == line_of("watched-break")
    capsys.readouterr()


def test_a_graph_break_under_fullgraph_that_ends_the_run_is_an_error(capsys) -> None:
    from torchdoctor.findings import Severity
    from torchdoctor.runtime.exceptions import explain_exception

    def strict(x: torch.Tensor) -> torch.Tensor:
        print("no", end="")
        return x + 1

    with pytest.raises(Exception) as raised:
        torch.compile(strict, backend="eager", fullgraph=True)(torch.randn(2))
    found = explain_exception(raised.value, roots=[str(Path(HERE).parent)])
    assert found is not None and found.code == "TD707" and found.severity is Severity.ERROR
    assert "fullgraph=True" in found.message
    capsys.readouterr()
