"""Which frames are the user's: the run script always, launchers and libraries never."""

from __future__ import annotations

import runpy
import sys
import sysconfig
import textwrap
from pathlib import Path

import click
import pytest

from torchdoctor.demo import SCRIPT as DEMO_SCRIPT
from torchdoctor.findings import Location
from torchdoctor.runtime import frames as frames_module
from torchdoctor.runtime.detectors.base import CallSite
from torchdoctor.runtime.frames import UserCode


def run_script(tmp_path: Path, body: str, user: UserCode) -> dict[str, object]:
    """Run ``body`` as ``train.py`` through runpy, as `torchdoctor run` does; its globals."""
    script = tmp_path / "train.py"
    script.write_text(body, encoding="utf-8")
    return runpy.run_path(str(script), init_globals={"sys": sys, "user": user})


def test_the_run_script_is_user_code_even_inside_torchdoctor() -> None:
    assert not UserCode().is_user_file(str(DEMO_SCRIPT))
    user = UserCode(scripts=[DEMO_SCRIPT])
    assert user.is_user_file(str(DEMO_SCRIPT))
    assert user.outside_torch(str(DEMO_SCRIPT))
    assert not user.is_user_file(frames_module.__file__)  # the rest of torchdoctor is ours
    assert not user.outside_torch(frames_module.__file__)


def test_a_folder_merely_named_torchdoctor_is_user_code(tmp_path: Path) -> None:
    script = tmp_path / "torchdoctor" / "train.py"
    script.parent.mkdir()
    script.write_text("pass\n", encoding="utf-8")
    assert UserCode().is_user_file(str(script))


@pytest.mark.parametrize(
    "filename",
    [
        click.core.__file__,
        runpy.__file__,
        "<frozen runpy>",
        str(Path(sysconfig.get_paths()["scripts"]) / "torchdoctor"),  # the console script
        "<string>",
        "",
    ],
)
def test_launchers_and_libraries_are_never_user_code(filename: str) -> None:
    assert not UserCode(scripts=[DEMO_SCRIPT]).is_user_file(filename)


def test_a_stack_walk_stops_at_runpy(tmp_path: Path) -> None:
    # Above runpy sits whoever launched the script: here this test file, which would count
    # as user code; under `torchdoctor run`, click and the entry point. Never a location.
    found = run_script(
        tmp_path,
        "inner = user.site(sys._getframe())\n"
        "outer = user.site(sys._getframe().f_back)\n"
        "key = user.caller_outside_torch(sys._getframe().f_back)\n",
        UserCode(),
    )
    inner = found["inner"]
    assert isinstance(inner, CallSite) and Path(inner.path).name == "train.py"
    assert (inner.line, inner.user) == (1, True)
    assert found["outer"] is None
    assert found["key"] is None


def test_a_library_caller_gives_way_to_the_users_line(tmp_path: Path) -> None:
    # copy.deepcopy (a library frame) calls back into the script, like Lightning's loop
    # calling backward(): the location is the user's line that called the library.
    found = run_script(
        tmp_path,
        textwrap.dedent("""\
        import copy
        class Probe:
            def __deepcopy__(self, memo):
                return user.caller_outside_torch(sys._getframe(1))
        site = copy.deepcopy(Probe())
    """),
        UserCode(),
    )
    site = found["site"]
    assert isinstance(site, CallSite) and Path(site.path).name == "train.py"
    assert (site.line, site.user) == (5, True)


def test_a_traceback_never_ends_in_the_launcher(tmp_path: Path) -> None:
    # runpy fails before any script frame exists: this test's own frame sits above runpy.
    with pytest.raises(OSError) as raised:
        runpy.run_path(str(tmp_path / "missing.py"))
    assert UserCode().site_from_traceback(raised.value.__traceback__) is None


def test_errors_and_warnings_place_the_run_script_as_user_code(tmp_path: Path) -> None:
    """The exception explainer and the warning capture use the same notion of user code:
    the script being run is the user's while it runs, and launchers never are."""
    from torchdoctor.runtime.exceptions.frames import (
        FrameRef,
        add_run_script,
        is_library_file,
        remove_run_script,
        user_frame,
    )

    script = str(DEMO_SCRIPT)
    launcher = str(tmp_path / "launch.py")  # outside every library: user-like on its own
    stack = [
        FrameRef(launcher, 3, "main"),
        FrameRef("<frozen runpy>", 88, "_run_code"),
        FrameRef(script, 77, "train"),
        FrameRef(frames_module.__file__, 10, "hook"),
    ]
    assert is_library_file(script) and user_frame(stack) is None
    add_run_script(script)
    try:
        assert not is_library_file(script)
        assert user_frame(stack) == stack[2]
    finally:
        remove_run_script(script)
    assert is_library_file(script)
    assert is_library_file(str(Path(sysconfig.get_paths()["scripts"]) / "torchdoctor"))


def test_a_library_call_site_gives_no_path_only_the_object() -> None:
    library = CallSite(click.core.__file__, 911, "invoke", False)
    assert library.location(object="loss") == Location(object="loss")
    user = CallSite(str(DEMO_SCRIPT), 3, "<module>", True)
    found = user.location(object="loss")
    assert (found.path, found.line, found.object) == (str(DEMO_SCRIPT), 3, "loss")
    assert found.snippet


def test_a_place_is_named_as_the_user_would_type_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from torchdoctor.runtime.exceptions.frames import FrameRef

    work, elsewhere = tmp_path / "project" / "runs", tmp_path / "drivers"
    work.mkdir(parents=True)
    elsewhere.mkdir()
    monkeypatch.chdir(work)
    inside = FrameRef(path=str(work / "src" / "train.py"), line=3, function="main")
    outside = FrameRef(path=str(elsewhere / "train.py"), line=35, function="main")
    assert inside.where == "src/train.py:3"
    assert outside.where == f"{elsewhere / 'train.py'}:35"  # not ../../drivers/train.py
