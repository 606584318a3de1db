"""The public API as a type checker sees it: real signatures, one error hierarchy."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import torchdoctor
from torchdoctor.errors import TorchDoctorError

_MYPY_CONFIG = """\
[mypy]
strict = True
[mypy-torch.*]
follow_imports = skip
[mypy-numpy.*]
follow_imports = skip
"""


def _mypy(tmp_path: Path, source: str) -> subprocess.CompletedProcess[str]:
    pytest.importorskip("mypy")
    script = tmp_path / "user_script.py"
    script.write_text(textwrap.dedent(source), encoding="utf-8")
    config = tmp_path / "mypy.ini"
    config.write_text(_MYPY_CONFIG, encoding="utf-8")
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(config),
            "--cache-dir",
            str(tmp_path / "cache"),
            "--no-error-summary",
            str(script),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )


def test_a_correct_user_script_type_checks_strictly(tmp_path: Path) -> None:
    result = _mypy(
        tmp_path,
        """
        from pathlib import Path

        import torchdoctor
        from torchdoctor import Finding, Report, Severity


        def main(model: object, batch: object, optimizer: object) -> int:
            report: Report = torchdoctor.lint([Path("train.py")], select=["TD2"], jobs=1)
            found: list[Finding] = report.findings
            checked = torchdoctor.check(model, batch, lambda out, y: out, optimizer,
                                        ignore=["TD7"], seed=1)
            with torchdoctor.watch(max_steps=3, status_line=None) as w:
                pass
            worst = w.report.worst_severity()
            try:
                torchdoctor.get_rule("TD999")
            except torchdoctor.TorchDoctorError as error:
                print(error)
            return len(found) + len(checked) + (worst is Severity.ERROR)
        """,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_misspelt_keyword_or_a_wrong_type_fails_strict_type_checking(tmp_path: Path) -> None:
    result = _mypy(
        tmp_path,
        """
        import torchdoctor

        torchdoctor.lint(123, selekt=["TD2"])
        torchdoctor.check(None, None, None, seeed=1)
        torchdoctor.watch(stauts=True)
        """,
    )
    assert result.returncode == 1
    out = result.stdout
    assert 'Unexpected keyword argument "selekt" for "lint"' in out
    assert 'Argument 1 to "lint" has incompatible type "int"' in out
    assert 'Unexpected keyword argument "seeed" for "check"' in out
    assert 'Unexpected keyword argument "stauts" for "watch"' in out


@pytest.mark.parametrize(
    "name",
    ["UnknownRuleError", "UnknownFormatError", "UsageError", "UserCodeError", "TorchMissingError"],
)
def test_every_error_of_ours_is_a_torchdoctor_error(name: str) -> None:
    assert issubclass(getattr(torchdoctor, name), TorchDoctorError)


def test_old_catches_still_catch_the_errors() -> None:
    from torchdoctor.report import render

    with pytest.raises(KeyError):
        torchdoctor.get_rule("TD999")
    with pytest.raises(ValueError, match="unknown format 'yaml'"):
        render(torchdoctor.Report(), "yaml")


def test_an_unknown_rule_reads_as_a_sentence() -> None:
    with pytest.raises(torchdoctor.UnknownRuleError) as caught:
        torchdoctor.get_rule("TD999")
    assert str(caught.value) == "unknown rule code 'TD999'; `torchdoctor rules` lists them"


def test_the_public_functions_are_real_functions_with_docs() -> None:
    import inspect

    for name in ("lint", "check", "watch"):
        function = getattr(torchdoctor, name)
        assert inspect.isfunction(function) and function.__module__ == "torchdoctor"
        assert function.__doc__ and "Args:" in function.__doc__


def test_a_report_takes_no_private_fields_and_sorts_once() -> None:
    from torchdoctor.findings import Depth, Location
    from torchdoctor.rules.registry import finding

    with pytest.raises(TypeError):
        torchdoctor.Report(_findings={})  # type: ignore[call-arg]
    report = torchdoctor.Report()
    report.add(finding("TD201", "b", Location(path="b.py", line=1), Depth.LINT))
    report.add(finding("TD201", "a", Location(path="a.py", line=1), Depth.LINT))
    first = report.findings
    assert [f.message for f in first] == ["a", "b"]
    first.clear()  # a copy: the report is untouched
    assert [f.message for f in report.findings] == ["a", "b"]
    assert report.findings[0] is report.findings[0]
    report.add(finding("TD201", "0", Location(path="0.py", line=1), Depth.LINT))
    assert [f.message for f in report] == ["0", "a", "b"]


@pytest.mark.parametrize(
    "options, shown",
    [
        ({}, False),
        ({"status_line": True}, True),
        ({"status_line": None}, None),
        ({"status": True}, None),  # the old name meant "only on a terminal"
        ({"status": False}, False),
    ],
)
def test_watch_status_line_says_what_it_does(
    options: dict[str, bool | None], shown: bool | None
) -> None:
    w = torchdoctor.watch(**options)  # not started: nothing is attached
    assert w._options.status is shown
