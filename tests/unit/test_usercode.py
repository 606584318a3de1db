"""One notion of user code: every depth agrees on which files and frames are the user's."""

from __future__ import annotations

import ast
import os
import traceback
from pathlib import Path

import pytest

import torchdoctor
from torchdoctor import _usercode
from torchdoctor.demo import SCRIPT as DEMO_SCRIPT
from torchdoctor.preflight.failures import user_frame as check_user_frame
from torchdoctor.runtime.exceptions.frames import FrameRef
from torchdoctor.runtime.exceptions.frames import user_frame as run_user_frame
from torchdoctor.runtime.frames import UserCode

SOURCE = Path(torchdoctor.__file__).parent


def _summary(path: str, line: int = 1) -> traceback.FrameSummary:
    return traceback.FrameSummary(path, line, "f", lookup_line=False)


def _site_packages_file() -> str:
    """A file of an installed package (click, a dependency of the CLI)."""
    import click

    return click.__file__


def test_a_file_in_site_packages_is_library_code_to_check_and_to_run(tmp_path: Path) -> None:
    numpy = pytest.importorskip("numpy")
    user = str(tmp_path / "train.py")
    for library in (numpy.__file__, _site_packages_file()):
        assert not _usercode.is_user_file(library)
        # check: the innermost user frame skips the library frame and finds the user's line
        found = check_user_frame([_summary(user, 3), _summary(library, 7)])
        assert found is not None and found.filename == user
        # run: the explainer and the monitor agree
        ref = run_user_frame([FrameRef(user, 3, "train"), FrameRef(library, 7, "f")])
        assert ref is not None and ref.path == user
        assert not UserCode().is_user_file(library)


def test_the_users_own_files_are_user_code_to_every_depth(tmp_path: Path) -> None:
    script = str(tmp_path / "train.py")
    assert _usercode.is_user_file(script) and UserCode().is_user_file(script)
    assert check_user_frame([_summary(script)]) is not None
    assert run_user_frame([FrameRef(script, 1, "f")]) is not None


@pytest.mark.parametrize(
    "path", ["<string>", "<frozen runpy>", "", os.__file__, torchdoctor.__file__]
)
def test_pseudo_files_the_stdlib_and_torchdoctor_are_never_user_code(path: str) -> None:
    assert not _usercode.is_user_file(path)
    assert check_user_frame([_summary(path)]) is None


def test_one_registry_of_run_scripts_serves_every_classifier() -> None:
    demo = str(DEMO_SCRIPT)
    assert not _usercode.is_user_file(demo)
    with _usercode.registered_run_script(demo):
        assert _usercode.is_user_file(demo) and UserCode().is_user_file(demo)
        assert check_user_frame([_summary(demo)]) is not None
        assert run_user_frame([FrameRef(demo, 1, "main")]) is not None
    assert not _usercode.is_user_file(demo)


def test_frames_above_a_launcher_are_never_the_users(tmp_path: Path) -> None:
    launcher = str(tmp_path / "cli.py")
    frames = [_summary(launcher), _summary("<frozen runpy>"), _summary(os.__file__)]
    assert check_user_frame(frames) is None


def test_no_module_keeps_a_classifier_or_a_factory_loader_of_its_own() -> None:
    """The old copies are gone: no other module lists the library directories or imports
    user files by path."""
    offenders = []
    for path in SOURCE.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        words = ("get_paths", "spec_from_file_location", "preflight.f")
        if path.name == "_usercode.py" or not any(word in text for word in words):
            continue  # parse only the files that could hold a copy
        tree = ast.parse(text)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") in (
                "get_paths",
                "spec_from_file_location",
            ):
                offenders.append(f"{path.relative_to(SOURCE)}:{node.lineno}")
            if (
                isinstance(node, ast.ImportFrom)
                and node.module
                in ("torchdoctor.preflight.factory", "torchdoctor.preflight.failures")
                and path.parent.name == "ckpt"
            ):
                offenders.append(f"{path.relative_to(SOURCE)}:{node.lineno} (ckpt)")
    assert offenders == [], offenders
