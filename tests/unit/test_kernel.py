"""The detector-execution kernel: one TD001, one evidence shape, selection everywhere."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest
from click.testing import CliRunner

import torchdoctor
from torchdoctor import _kernel
from torchdoctor.env import EnvFacts
from torchdoctor.env import api as env_api
from torchdoctor.env import diagnose as diagnose_env
from torchdoctor.findings import INTERNAL_ERROR_CODE, INTERNAL_ERRORS, Depth, Finding, Location
from torchdoctor.rules.detectors import DetectorInfo
from torchdoctor.rules.registry import finding, get_rule
from torchdoctor.rules.selection import Selection

SOURCE = Path(torchdoctor.__file__).parent
FACTS = EnvFacts(
    python="3.11.0",
    platform="Linux",
    torch="2.5.0",
    cpu_count=8,
    usable_cpus=8,
    intra_op_threads=8,
    default_dtype="float32",
    anomaly_detection=False,
    cudnn_benchmark=False,
    cudnn_deterministic=False,
)
LOUD = dataclasses.replace(
    FACTS, variables=(("CUDA_LAUNCH_BLOCKING", "1"),), default_dtype="float64"
)
EVIDENCE_KEYS = {"detector", "codes", "exception", "error", "at"}


def _builds_td001(call: ast.Call) -> bool:
    name = call.func.id if isinstance(call.func, ast.Name) else getattr(call.func, "attr", "")
    if name not in ("finding", "Finding"):
        return False
    first = (
        call.args[0]
        if call.args
        else next((k.value for k in call.keywords if k.arg == "code"), None)
    )
    return (isinstance(first, ast.Constant) and first.value == "TD001") or (
        isinstance(first, ast.Name) and first.id == "INTERNAL_ERROR_CODE"
    )


def test_exactly_one_place_builds_a_td001() -> None:
    builders = sorted(
        f"{path.relative_to(SOURCE)}:{node.lineno}"
        for path in SOURCE.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call) and _builds_td001(node)
    )
    assert len(builders) == 1 and builders[0].startswith("_kernel.py:"), builders


def test_the_kernel_imports_no_torch() -> None:
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(ast.parse((SOURCE / "_kernel.py").read_text()))
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in (
            node.names if isinstance(node, ast.Import) else [ast.alias(node.module or "")]
        )
    }
    assert "torch" not in imported and "numpy" not in imported


def _broken(facts: EnvFacts, out: _kernel.Reporter) -> None:
    raise ZeroDivisionError("env bug")


def test_a_failing_detector_is_one_td001_with_the_common_evidence(monkeypatch) -> None:
    monkeypatch.setattr(
        env_api,
        "registered_detectors",
        lambda depth: [DetectorInfo(("TD010",), depth, _broken), *_real(depth)],
    )
    report = diagnose_env(LOUD)
    (internal,) = report.by_code("TD001")
    assert set(internal.evidence) == EVIDENCE_KEYS
    assert internal.evidence["codes"] == ["TD010"]
    assert "_broken" in internal.message and "ZeroDivisionError: env bug" in internal.message
    assert "--ignore TD010" in internal.fix_hint
    (trace,) = report.facts[INTERNAL_ERRORS]
    assert "Traceback (most recent call last)" in trace and "in _broken" in trace
    assert report.by_code("TD013")  # the other detectors carried on


def _real(depth: Depth) -> list[DetectorInfo]:
    from torchdoctor.rules.detectors import registered_detectors

    return registered_detectors(depth)


def test_every_depth_gives_a_td001_the_same_evidence_keys() -> None:
    def raising(out: _kernel.Reporter) -> None:
        raise KeyError("x")

    shapes = []
    for depth in Depth:
        (found,) = _kernel.run_detector(
            f"{depth.value} detector d",
            ("TD201",),
            raising,
            depth,
            Location(object="d"),
            Selection(),
        )
        shapes.append(set(found.evidence) - {"traceback"})
    assert all(shape == EVIDENCE_KEYS for shape in shapes)


def test_a_detector_of_unselected_codes_does_not_run() -> None:
    calls: list[int] = []

    def detector(out: _kernel.Reporter) -> None:
        calls.append(1)

    assert (
        _kernel.run_detector(
            "d", ("TD201",), detector, Depth.RUN, Location(), Selection.from_options(ignore=["TD2"])
        )
        == []
    )
    assert calls == []


def test_findings_outside_the_selection_are_dropped_but_td001_never() -> None:
    kept = finding("TD201", "kept", Location(object="a"), Depth.RUN)
    dropped = finding("TD202", "dropped", Location(object="a"), Depth.RUN)
    internal = _kernel.internal_error("d", None, Depth.RUN, Location(object="d"))
    selection = Selection.from_options(["TD201"])
    assert _kernel.selected([kept, dropped, internal], selection) == [kept, internal]


def test_every_depth_reports_through_one_reporter() -> None:
    # report() builds the finding from the catalogue at the detector's depth, with its
    # first code by default; emit() hands over one already built; both reach the sink.
    found: list[Finding] = []
    out = _kernel.Reporter(found.append, Depth.CHECK, ("TD201", "TD202"))
    out.report(Location(object="a"), "first code", evidence={"n": 1})
    out.report(Location(object="b"), "second code", code="TD202", fix_hint="Do it.")
    out.emit(finding("TD203", "built", Location(object="c"), Depth.CHECK))
    assert [(f.code, f.depth, f.severity) for f in found] == [
        ("TD201", Depth.CHECK, get_rule("TD201").severity),
        ("TD202", Depth.CHECK, get_rule("TD202").severity),
        ("TD203", Depth.CHECK, get_rule("TD203").severity),
    ]
    assert found[0].evidence == {"n": 1} and found[1].fix_hint == "Do it."


def test_what_a_detector_reported_before_it_raised_is_dropped_with_it() -> None:
    def half_done(out: _kernel.Reporter) -> None:
        out.report(Location(object="a"), "partial")
        raise KeyError("x")

    (found,) = _kernel.run_detector(
        "d", ("TD201",), half_done, Depth.CHECK, Location(object="d"), Selection()
    )
    assert found.code == INTERNAL_ERROR_CODE


def test_a_detector_that_still_yields_is_a_td001_not_silence() -> None:
    def yielding(out: _kernel.Reporter):  # type: ignore[no-untyped-def]
        yield finding("TD201", "lost", Location(object="a"), Depth.CHECK)

    (found,) = _kernel.run_detector(
        "d", ("TD201",), yielding, Depth.CHECK, Location(object="d"), Selection()
    )
    assert found.code == INTERNAL_ERROR_CODE and "generator" in found.message


def test_every_function_detector_reports_through_its_reporter() -> None:
    import inspect

    from torchdoctor.rules.detectors import load_detector_modules, registered_detectors

    load_detector_modules()
    functions = [i for i in registered_detectors() if inspect.isfunction(i.target)]
    assert functions  # probes, checkpoint and environment checks
    wrong = [
        i.name
        for i in functions
        if inspect.isgeneratorfunction(i.target) or len(inspect.signature(i.target).parameters) != 2
    ]
    assert wrong == []


def test_an_error_meant_for_the_user_passes_through() -> None:
    def refusing(out: _kernel.Reporter) -> None:
        raise torchdoctor.UsageError("bad input")

    with pytest.raises(torchdoctor.UsageError):
        _kernel.run_detector("d", ("TD201",), refusing, Depth.CHECK, Location(), Selection())


@pytest.mark.parametrize(
    "options, codes",
    [
        ({}, {"TD010", "TD013"}),
        ({"select": ["TD01"]}, {"TD010", "TD013"}),
        ({"select": ["TD010"]}, {"TD010"}),
        ({"ignore": ["TD010"]}, {"TD013"}),
    ],
)
def test_env_applies_selection(options: dict[str, list[str]], codes: set[str]) -> None:
    assert diagnose_env(LOUD, **options).codes() == codes


@pytest.mark.parametrize("debug", [False, True])
def test_debug_prints_the_traceback_of_env_as_for_every_command(monkeypatch, debug: bool) -> None:
    from torchdoctor.cli import main

    monkeypatch.setattr(env_api, "facts", lambda: LOUD)
    monkeypatch.setattr(
        env_api, "registered_detectors", lambda depth: [DetectorInfo(("TD010",), depth, _broken)]
    )
    result = CliRunner().invoke(main, [*(["--debug"] if debug else []), "env", "--format", "json"])
    assert result.exit_code == 2 and "TD001" in result.stdout
    assert "Traceback" not in result.stdout
    assert ("in _broken" in result.stderr) is debug


def test_env_cli_takes_select_and_ignore(monkeypatch) -> None:
    import json

    from torchdoctor.cli import main

    monkeypatch.setattr(env_api, "facts", lambda: LOUD)
    result = CliRunner().invoke(main, ["env", "--format", "json", "--ignore", "TD010"])
    assert {f["code"] for f in json.loads(result.stdout)["findings"]} == {"TD013"}
    result = CliRunner().invoke(main, ["env", "--format", "json", "--select", "TD010"])
    assert {f["code"] for f in json.loads(result.stdout)["findings"]} == {"TD010"}


@pytest.mark.needs_torch
def test_ckpt_applies_selection_in_the_api_and_the_cli(tmp_path: Path) -> None:
    import json

    torch = pytest.importorskip("torch")
    from torchdoctor.ckpt import diagnose as diagnose_ckpt
    from torchdoctor.cli import main

    state = torch.nn.Linear(2, 2).state_dict()
    state["weight"][0, 0] = float("nan")
    path = tmp_path / "nan.pt"
    torch.save(state, path)
    assert "TD911" in diagnose_ckpt(path).codes()
    assert "TD911" not in diagnose_ckpt(path, ignore=["TD911"]).codes()
    assert "TD911" not in diagnose_ckpt(path, select=["TD909"]).codes()
    result = CliRunner().invoke(main, ["ckpt", str(path), "--format", "json", "--ignore", "TD9"])
    assert result.exit_code == 0 and json.loads(result.stdout)["findings"] == []


@pytest.mark.parametrize(
    ("package", "decorator"),
    [
        ("torchdoctor.runtime.detectors", "detector"),
        ("torchdoctor.preflight.probes", "probe"),
    ],
)
def test_every_module_that_registers_a_detector_is_imported_by_name(
    package: str, decorator: str
) -> None:
    """Registration is explicit: a detector module the package's ``__init__`` does not
    name would never run. The list states the order; nothing is found by scanning."""
    import ast
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec(package)
    assert spec is not None and spec.origin is not None
    folder = Path(spec.origin).parent
    init = ast.parse((folder / "__init__.py").read_text(encoding="utf-8"))
    named = {
        alias.name
        for node in init.body
        if isinstance(node, ast.ImportFrom) and node.module == package
        for alias in node.names
    }

    def registers(path: Path) -> bool:
        return any(
            isinstance(node, (ast.ClassDef, ast.FunctionDef))
            and any(
                isinstance(d, ast.Call) and getattr(d.func, "id", None) == decorator
                for d in node.decorator_list
            )
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        )

    registering = {path.stem for path in folder.glob("*.py") if registers(path)}
    assert registering and registering <= named, (
        f"import these in {package}/__init__.py: {sorted(registering - named)}"
    )
