"""Which frames are the user's: the run script always, launchers and libraries never."""

from __future__ import annotations

import runpy
import sys
import sysconfig
from pathlib import Path
from types import FrameType

import click
import pytest

from torchdoctor.demo import SCRIPT as DEMO_SCRIPT
from torchdoctor.runtime import frames as frames_module
from torchdoctor.runtime.frames import UserCode


def run_capturing(tmp_path: Path, body: str) -> dict[str, object]:
    """Run a script through runpy, as `torchdoctor run` does; return its globals."""
    script = tmp_path / "train.py"
    script.write_text(body, encoding="utf-8")
    return runpy.run_path(str(script), init_globals={"sys": sys}, run_name="__main__")


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


@pytest.mark.parametrize("filename", [
    click.core.__file__,
    runpy.__file__,
    "<frozen runpy>",
    str(Path(sysconfig.get_paths()["scripts"]) / "torchdoctor"),  # the console script
    "<string>",
    "",
])
def test_launchers_and_libraries_are_never_user_code(filename: str) -> None:
    assert not UserCode(scripts=[DEMO_SCRIPT]).is_user_file(filename)


def test_a_stack_walk_stops_at_runpy(tmp_path: Path) -> None:
    # Above runpy sits whoever launched the script (here this test file, which would count
    # as user code; under `torchdoctor run`, click and the entry point): never a location.
    user = UserCode()
    found = run_capturing(tmp_path, "inner = user.site(sys._getframe())\n"
                                    "outer = user.site(sys._getframe().f_back)\n"
                                    "key = user.caller_outside_torch(sys._getframe().f_back)\n"
                          .replace("user.", "USER."))  if False else None
    del found
    namespace = runpy.run_path(
        str(_write(tmp_path, "inner = user.site(sys._getframe())\n"
                             "outer = user.site(sys._getframe().f_back)\n"
                             "key = user.caller_outside_torch(sys._getframe().f_back)\n")),
        init_globals={"sys": sys, "user": user})
    inner = namespace["inner"]
    assert inner is not None and Path(inner.path).name == "train.py" and inner.line == 1
    assert namespace["outer"] is None
    assert namespace["key"] is None


def _write(tmp_path: Path, body: str) -> Path:
    script = tmp_path / "train.py"
    script.write_text(body, encoding="utf-8")
    return script
