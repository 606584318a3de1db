"""`torchdoctor demo`: every runtime finding points at the bundled script's own lines.

The demo script lives inside torchdoctor's package, where every other file is ours, not
the user's; the script being run must still count as the user's code.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = [pytest.mark.needs_torch, pytest.mark.slow]
torch = pytest.importorskip("torch")

from torchdoctor.demo import SCRIPT, run_demo  # noqa: E402
from torchdoctor.findings import Depth  # noqa: E402


def line_of(text: str) -> int:
    """The first line of the demo script's code that starts with ``text``."""
    lines = SCRIPT.read_text(encoding="utf-8").splitlines()
    return next(number for number, line in enumerate(lines, 1) if line.strip().startswith(text))


@pytest.fixture(scope="module")
def demo():
    threads = torch.get_num_threads()
    result = run_demo(run_steps=20)
    assert torch.get_num_threads() == threads  # the demo leaves torch's settings alone
    return result


def runtime_finding(demo, code: str):
    [section] = [s for s in demo.sections if s.depth is Depth.RUN]
    [found] = section.report.by_code(code)
    return found.location


def test_runtime_findings_point_at_the_demo_script(demo) -> None:
    [section] = [s for s in demo.sections if s.depth is Depth.RUN]
    paths = {f.location.path for f in section.report.findings}
    assert paths <= {str(SCRIPT), None}
    assert {"TD201", "TD501", "TD205"} <= section.report.codes()


def test_grads_never_cleared_points_at_the_optimizer_step(demo) -> None:
    location = runtime_finding(demo, "TD201")
    assert (Path(location.path), location.line) == (SCRIPT, line_of("optimizer.step()"))
    assert "optimizer.step()" in location.snippet


def test_eval_in_train_mode_points_at_the_evaluation_call(demo) -> None:
    location = runtime_finding(demo, "TD501")
    assert (Path(location.path), location.line) == (SCRIPT, line_of("correct += (model(images)"))


def test_retained_graph_points_at_the_loss_or_its_holder(demo) -> None:
    location = runtime_finding(demo, "TD205")
    assert Path(location.path) == SCRIPT
    assert location.line in {line_of("loss.backward()"), line_of("running_loss += loss")}


def test_lint_and_run_merge_into_one_finding_per_problem(demo) -> None:
    for code in ("TD201", "TD501", "TD205"):
        [merged] = demo.combined.by_code(code)
        assert set(merged.depths) == {Depth.LINT, Depth.RUN}, code
