"""Following children: the configuration, the environment, DataLoader workers left alone."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from torchdoctor.runtime.children import ENV, ChildConfig, Following, _watch_target


def test_config_round_trips_through_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    config = ChildConfig(
        parts="/tmp/x",
        max_steps=5,
        select=("TD2",),
        ignore=("TD201",),
        localise_non_finite=True,
        roots=("/a",),
        script="/a/train.py",
    )
    monkeypatch.setenv(ENV, config.to_env())
    assert ChildConfig.from_env() == config


@pytest.mark.parametrize("raw", ["", "not json", '{"no_parts": 1}', "[1, 2]"])
def test_a_bad_environment_means_no_following(raw: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, raw)
    assert ChildConfig.from_env() is None


def test_following_sets_and_restores_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from multiprocessing import process

    monkeypatch.setenv("PYTHONPATH", "/user/path")
    monkeypatch.delenv(ENV, raising=False)
    original = process.BaseProcess._bootstrap  # type: ignore[attr-defined]
    following = Following(ChildConfig(parts="", max_steps=3))
    try:
        with following:
            entries = os.environ["PYTHONPATH"].split(os.pathsep)
            assert (Path(entries[0]) / "sitecustomize.py").is_file()
            assert entries[-1] == "/user/path"
            config = ChildConfig.from_env()
            assert config is not None and config.max_steps == 3
            assert Path(config.parts) == following.parts_dir
            assert process.BaseProcess._bootstrap is not original  # type: ignore[attr-defined]
        assert os.environ["PYTHONPATH"] == "/user/path"
        assert ENV not in os.environ
        assert process.BaseProcess._bootstrap is original  # type: ignore[attr-defined]
        assert following.parts() == []
    finally:
        following.cleanup()
    assert not following.folder.exists()


class _Process:
    def __init__(self, target: object, args: tuple[object, ...] = ()) -> None:
        self._target = target
        self._args = args


def test_dataloader_workers_are_never_watched(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    from torch.utils.data._utils import worker

    monkeypatch.setenv(ENV, ChildConfig(parts="/tmp/x").to_env())
    child = _Process(worker._worker_loop)
    _watch_target(child)
    assert child._target is worker._worker_loop
    assert torch is not None


def test_other_targets_are_wrapped_only_when_followed(monkeypatch: pytest.MonkeyPatch) -> None:
    def train() -> None:
        """A user's target."""

    monkeypatch.delenv(ENV, raising=False)
    child = _Process(train)
    _watch_target(child)
    assert child._target is train
    monkeypatch.setenv(ENV, ChildConfig(parts="/tmp/x").to_env())
    _watch_target(child)
    assert child._target is not train and getattr(child._target, "function", None) is train


@pytest.mark.parametrize(
    ("argv", "itself"),
    [
        (
            [
                "python",
                "-c",
                "from multiprocessing.spawn import spawn_main; spawn_main()",
                "--multiprocessing-fork",
            ],
            True,
        ),
        (["python", "-c", "from multiprocessing.resource_tracker import main;main(5)"], True),
        (["python", "-m", "torchdoctor.distributed.rank", "train.py"], True),
        (["/venv/bin/torchdoctor", "run", "train.py"], True),
        (["python", "worker.py"], False),
        (["python", "/home/me/torchdoctor-experiments/train.py"], False),
    ],
)
def test_which_children_start_a_monitor_at_start_up(argv: list[str], itself: bool) -> None:
    from torchdoctor.runtime.children import _watches_itself

    assert _watches_itself(argv) is itself
