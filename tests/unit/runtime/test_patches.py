"""Attribute patches never outlive their owner: removed newest first, also when the owner
went without removing them, and also when another patch covered them at the time."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from torchdoctor.runtime.patches import Patches, after_call, remove_dead


def original(x: int) -> int:
    return x + 1


def wrapping(patches: Patches, seen: list[Any]) -> Any:
    return after_call(patches, lambda result, *args: seen.append(result), seen.append)


def test_a_patch_removed_while_another_covers_it_goes_when_that_one_goes() -> None:
    target = SimpleNamespace(function=original)
    older, newer, seen = Patches(), Patches(), []
    older.wrap(target, "function", wrapping(older, seen))
    newer.wrap(target, "function", wrapping(newer, seen))
    assert target.function(1) == 2 and seen == [2, 2]
    older.remove()  # covered by newer: cannot be undone yet
    newer.remove()
    remove_dead()
    assert target.function is original


def test_the_patches_of_an_owner_that_is_gone_are_removed_without_being_called() -> None:
    target = SimpleNamespace(function=original)
    owner_alive = [True]
    patches = Patches(alive=lambda: owner_alive[0])
    patches.wrap(target, "function", wrapping(patches, []))
    remove_dead()
    assert target.function is not original  # its owner still runs
    owner_alive[0] = False
    remove_dead()
    assert target.function is original and not patches.active


def test_a_patch_replaced_by_someone_else_is_left_to_them() -> None:
    target = SimpleNamespace(function=original)
    patches = Patches()
    patches.wrap(target, "function", wrapping(patches, []))

    def theirs(x: int) -> int:
        return x

    target.function = theirs
    patches.remove()
    remove_dead()
    assert target.function is theirs
