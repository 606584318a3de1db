"""The CUDA synchronisation counter, driven by a stand-in for torch.cuda (no GPU needed).

PyTorch reports each synchronising call in ``set_sync_debug_mode("warn")`` as a Python
warning; the counter must count every one of them in its window and leave the user's
warnings exactly as they were: one already shown is not shown a second time.
"""

from __future__ import annotations

import warnings
from types import SimpleNamespace
from typing import Any

import pytest

from torchdoctor.runtime.cuda import SyncCounter

SYNC = "called a synchronizing CUDA operation"


def _fake_torch() -> Any:
    mode = [0]
    cuda = SimpleNamespace(
        get_sync_debug_mode=lambda: mode[0],
        set_sync_debug_mode=lambda value: mode.__setitem__(0, value),
    )
    return SimpleNamespace(cuda=cuda, mode=mode)


def _synchronise() -> None:
    warnings.warn(SYNC, UserWarning, stacklevel=1)  # one call site, like torch's C++ warning


def _user_warning() -> None:
    warnings.warn("the user's own notice", UserWarning, stacklevel=1)


@pytest.fixture
def shown() -> Any:
    """The messages the warnings machinery shows, in order (a user's ``showwarning``)."""
    messages: list[str] = []
    with warnings.catch_warnings():
        warnings.simplefilter("default")
        warnings.showwarning = lambda message, *rest, **kw: messages.append(str(message))
        yield messages


def test_every_synchronising_call_in_the_window_is_counted_and_hidden(shown: list[str]) -> None:
    torch = _fake_torch()
    counter = SyncCounter(torch)
    counter.start()
    assert torch.mode[0] == 1
    for _ in range(3):
        _synchronise()
    counter.stop()
    assert counter.windows == [3] and torch.mode[0] == 0
    assert shown == []


def test_a_warning_shown_before_the_window_is_not_shown_again_after_it(shown: list[str]) -> None:
    counter = SyncCounter(_fake_torch())
    _user_warning()
    counter.start()
    _user_warning()  # inside the window: still the user's, still shown once only
    _synchronise()
    counter.stop()
    _user_warning()
    assert shown == ["the user's own notice"]
    assert counter.windows == [1]


def test_the_users_filters_and_showwarning_come_back_unchanged(shown: list[str]) -> None:
    counter = SyncCounter(_fake_torch())
    filters, show = list(warnings.filters), warnings.showwarning
    counter.start()
    counter.stop()
    counter.stop()  # a second stop is harmless
    assert warnings.filters == filters and warnings.showwarning is show
