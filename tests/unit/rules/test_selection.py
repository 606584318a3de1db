from __future__ import annotations

from torchdoctor.rules.selection import Selection


def test_everything_is_selected_by_default() -> None:
    assert Selection.from_options().is_enabled("TD201")


def test_longest_prefix_wins() -> None:
    selection = Selection.from_options(select=["TD2"], ignore=["TD20"])
    assert not selection.is_enabled("TD201")
    assert selection.is_enabled("TD215")
    narrower = Selection.from_options(select=["TD201"], ignore=["TD2"])
    assert narrower.is_enabled("TD201")
    assert not narrower.is_enabled("TD202")


def test_comma_separated_and_case_insensitive() -> None:
    selection = Selection.from_options(select=["td1,TD3"], ignore=None)
    assert selection.is_enabled("TD101")
    assert selection.is_enabled("TD305")
    assert not selection.is_enabled("TD201")


def test_ignore_wins_a_tie() -> None:
    assert not Selection.from_options(select=["TD2"], ignore=["TD2"]).is_enabled("TD201")
