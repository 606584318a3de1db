"""Progress reports reach a listener only inside ``listening``; the CLI shows them only on
a terminal outside CI."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from torchdoctor.progress import advance, listening


def test_progress_reaches_the_listener_only_inside_the_block() -> None:
    seen: list[tuple[str, str, int, int]] = []
    advance("lint", "a.py", 1, 2)
    with listening(lambda *event: seen.append(event)):
        advance("lint", "a.py", 1, 2)
        advance("lint", "", 2, 2)
    advance("lint", "b.py", 1, 2)
    assert seen == [("lint", "a.py", 1, 2), ("lint", "", 2, 2)]


def test_a_failing_listener_never_breaks_the_work() -> None:
    def broken(*event: object) -> None:
        raise RuntimeError("display gone")

    with listening(broken):
        advance("check", "probe", 0, 3)  # no exception


def test_lint_reports_each_file_done(tmp_path: Path) -> None:
    from torchdoctor.static import lint

    for index in range(3):
        (tmp_path / f"m{index}.py").write_text("x = 1\n", encoding="utf-8")
    seen: list[tuple[str, str, int, int]] = []
    with listening(lambda *event: seen.append(event)):
        lint([tmp_path], jobs=1)
    assert [(task, done, total) for task, _, done, total in seen] == [
        ("lint", 1, 3),
        ("lint", 2, 3),
        ("lint", 3, 3),
    ]


@pytest.mark.needs_torch
def test_check_reports_each_probe_then_the_end() -> None:
    torch = pytest.importorskip("torch")
    import torchdoctor

    model = torch.nn.Linear(4, 2)
    seen: list[tuple[str, str, int, int]] = []
    with listening(lambda *event: seen.append(event)):
        torchdoctor.check(
            model,
            (torch.randn(8, 4), torch.randint(0, 2, (8,))),
            torch.nn.CrossEntropyLoss(),
            select=["TD3"],
        )
    total = seen[-1][3]
    assert total > 1 and seen[-1] == ("check", "", total, total)
    assert [done for _, _, done, _ in seen] == list(range(total + 1))
    assert all(item for _, item, done, _ in seen[:-1])


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("terminal", "ci", "shown"), [(True, None, True), (True, "true", False), (False, None, False)]
)
def test_cli_shows_progress_only_on_a_terminal_outside_ci(
    monkeypatch: pytest.MonkeyPatch, terminal: bool, ci: str | None, shown: bool
) -> None:
    from torchdoctor.cli import shared as cli

    stream = _Terminal() if terminal else io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    with cli.progress_display("check"):
        advance("check", "loss.softmax_before_cross_entropy", 0, 2)
        advance("check", "", 2, 2)
    assert ("torchdoctor check" in stream.getvalue()) is shown


def test_cli_lint_progress_waits_for_a_large_tree(monkeypatch: pytest.MonkeyPatch) -> None:
    from torchdoctor.cli import shared as cli

    stream = _Terminal()
    monkeypatch.setattr(sys, "stderr", stream)
    monkeypatch.delenv("CI", raising=False)
    with cli.progress_display("lint", minimum=cli.LINT_PROGRESS_FILES):
        advance("lint", "a.py", 1, 3)
    assert stream.getvalue() == ""
