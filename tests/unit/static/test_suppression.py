"""``# noqa: TD201`` per line (prefix match, bare noqa ignored) and ``# torchdoctor: noqa``."""

from __future__ import annotations

import textwrap

import pytest

from torchdoctor.static import lint_source

LOOP = """\
import torch
def train(model, loader, optimizer):
    for x, y in loader:
        model(x).sum().backward()
        optimizer.step(){comment}
"""


def codes(comment: str = "", header: str = "") -> list[str]:
    source = header + LOOP.format(comment=comment)
    return [f.code for f in lint_source(source, "train.py", select=["TD2"])]


@pytest.mark.parametrize(
    "comment",
    [
        "  # noqa: TD201",
        "  # noqa: TD2",
        "  # NOQA:TD201",
        "  # noqa: E501, TD201",
        "  # noqa: td201",
        "  # noqa: TD",
    ],
)
def test_line_noqa_with_a_matching_code_silences(comment: str) -> None:
    assert codes(comment) == []


@pytest.mark.parametrize(
    "comment",
    [
        "  # noqa",
        "  # noqa: E501",
        "  # noqa: TD203",
        "  # noqa: TD2019",
        "  # type: ignore",
    ],
)
def test_bare_or_unrelated_noqa_does_not_silence(comment: str) -> None:
    assert codes(comment) == ["TD201"]


def test_noqa_on_another_line_does_not_silence() -> None:
    source = LOOP.format(comment="").replace(
        "for x, y in loader:", "for x, y in loader:  # noqa: TD201"
    )
    assert [f.code for f in lint_source(source, select=["TD2"])] == ["TD201"]


@pytest.mark.parametrize(
    "header, silenced",
    [
        ("# torchdoctor: noqa\n", True),
        ("# torchdoctor: noqa: TD201\n", True),
        ("# torchdoctor: noqa: TD5\n", False),
        ("x = 1  # torchdoctor: noqa\n", False),
        ("# noqa\n", False),
    ],
)
def test_file_level_suppression(header: str, silenced: bool) -> None:
    assert codes(header=header) == ([] if silenced else ["TD201"])


def test_syntax_errors_are_reported_despite_a_line_noqa_elsewhere() -> None:
    source = textwrap.dedent("""\
        x = 1  # noqa: TD201
        def (:
        """)
    assert [f.code for f in lint_source(source)] == ["TD002"]
