"""The engine: one traversal, dispatch, isolation of rule bugs, and no crash on any input."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from torchdoctor.findings import Depth, Severity
from torchdoctor.rules.selection import Selection
from torchdoctor.static import LintConfig, engine, fix, lint_source
from torchdoctor.static.context import FileContext
from torchdoctor.static.rules.base import LintRule
from torchdoctor.static.structure import FrameKind, Loop
from torchdoctor.static.walker import Walker

BUGGY = """\
import torch
def train(model, loader, optimizer):
    for x, y in loader:
        model(x).sum().backward()
        optimizer.step()
"""


class _Crashing(LintRule):
    """A rule with a bug: raises on every call."""

    def visit_Call(self, node: ast.Call) -> None:
        raise ZeroDivisionError("boom")


class _Recorder(LintRule):
    """Records what the engine feeds it, in order."""

    seen: list[str] = []

    def visit_Call(self, node: ast.Call) -> None:
        self.seen.append(f"call:{node.lineno}")

    def leave_loop(self, loop: Loop) -> None:
        self.seen.append(f"loop:{loop.line}:{len(loop.items)}")

    def leave_module(self, module: object) -> None:
        self.seen.append("module")


@pytest.fixture
def extra_rule(monkeypatch: pytest.MonkeyPatch):
    def add(cls: type[LintRule], code: str) -> None:
        specs = [*engine.rule_specs(), engine._spec(cls, (code,))]
        monkeypatch.setattr(engine, "_SPECS", specs)

    return add


def test_a_crashing_rule_becomes_one_td001_and_the_others_still_report(extra_rule) -> None:
    extra_rule(_Crashing, "TD206")
    found = lint_source(BUGGY, "train.py")
    internal = [f for f in found if f.code == "TD001"]
    assert len(internal) == 1
    assert "_Crashing" in internal[0].message and "train.py" in internal[0].message
    assert "ZeroDivisionError" in internal[0].message
    assert "TD201" in {f.code for f in found}


def test_hooks_run_in_source_order_and_scopes_end_after_their_bodies(extra_rule) -> None:
    _Recorder.seen = []
    extra_rule(_Recorder, "TD206")
    lint_source(BUGGY, "train.py", select=["TD206"])
    assert _Recorder.seen == ["call:4", "call:4", "call:4", "call:5", "loop:3:4", "module"]


def test_internal_errors_pass_any_selection(extra_rule) -> None:
    extra_rule(_Crashing, "TD206")
    found = lint_source(BUGGY, "train.py", select=["TD206"])
    assert [f.code for f in found] == ["TD001"]


def test_td001_keeps_the_traceback_apart_in_lint_source_and_in_lint(extra_rule, tmp_path) -> None:
    from torchdoctor.static import LintConfig, lint

    extra_rule(_Crashing, "TD206")
    linted = lint_source(BUGGY, "train.py")
    (found,) = linted.by_code("TD001")
    assert "traceback" not in found.evidence
    (trace,) = linted.facts["internal_errors"]
    assert "Traceback (most recent call last)" in trace and "ZeroDivisionError: boom" in trace
    path = tmp_path / "train.py"
    path.write_text(BUGGY, encoding="utf-8")
    report = lint(path, config=LintConfig(), jobs=1)
    (found,) = report.by_code("TD001")
    assert "traceback" not in found.evidence and found.evidence["exception"] == "ZeroDivisionError"
    (trace,) = report.facts["internal_errors"]
    assert "visit_Call" in trace and "ZeroDivisionError: boom" in trace


def test_the_test_helper_fails_on_a_crash_of_a_rule_it_was_not_asked_about(extra_rule) -> None:
    from tests.unit.static.helpers import lint_codes

    assert lint_codes(BUGGY, "TD201") == [("TD201", 5)]
    extra_rule(_Crashing, "TD206")
    with pytest.raises(AssertionError, match="(?s)a lint rule crashed.*ZeroDivisionError"):
        lint_codes(BUGGY, "TD201")


def test_frames_record_the_blocks_around_calls() -> None:
    source = """\
import torch
def f(model, loader):
    for x in loader:
        if x:
            with torch.no_grad():
                model(x)
        else:
            try:
                g(x)
            except ValueError:
                h(x)
"""
    ctx = FileContext("x.py", source, ast.parse(source))
    Walker(ctx, structure=True).walk()
    function = ctx.module.functions[0]
    kinds = {
        item.node.func.id if isinstance(item.node.func, ast.Name) else "model": [
            f.kind for f in item.frames[2:]
        ]
        for item in function.items
        if isinstance(item.node, ast.Call)
    }
    assert kinds["model"] == [FrameKind.LOOP, FrameKind.IF_BODY, FrameKind.WITH]
    assert kinds["g"] == [FrameKind.LOOP, FrameKind.IF_ELSE, FrameKind.TRY]
    assert kinds["h"] == [FrameKind.LOOP, FrameKind.IF_ELSE, FrameKind.EXCEPT]


def test_selection_switches_rules_off() -> None:
    assert {f.code for f in lint_source(BUGGY, select=["TD2"], ignore=["TD201"])} == set()
    assert {f.code for f in lint_source(BUGGY, select=["TD201"])} == {"TD201"}


def test_rules_are_skipped_when_their_required_words_are_absent() -> None:
    ctx = FileContext("x.py", "x = 1\n", ast.parse("x = 1\n"))
    assert engine.lint_tree(ctx, Selection()) == []


@pytest.mark.parametrize(
    "source, line, words",
    [
        ("def f(:\n    pass\n", 1, "not valid Python"),
        ("x = 1\n<<<<<<< HEAD\ny = 2\n", 2, "merge-conflict marker"),
        ("print 'hello'\n", 1, "not valid Python"),
        (b"x = 1\x00\x01\x02", 1, "looks binary"),
        (b"x = '\xe9\xe8'\n", 1, "not valid utf-8"),
        (b"# -*- coding: klingon -*-\nx = 1\n", 1, "unknown encoding"),
        ("x = (" * 300 + ")" * 300 + "\n", 1, "not valid Python"),
        ("x = " + "-" * 200_000 + "1\n", 1, "nested too deeply"),
    ],
)
def test_unparsable_input_becomes_td002_with_a_place(
    source: str | bytes, line: int, words: str
) -> None:
    (found,) = lint_source(source, "bad.py")
    assert found.code == "TD002"
    assert found.location.path == "bad.py" and found.location.line == line
    assert words in found.message
    assert found.fix_hint


@pytest.mark.parametrize(
    "cookie",
    [
        b"# -*- coding: future_fstrings -*-\n",
        b"#!/usr/bin/env python\n# coding: future-fstrings\n",
        b"# -*- coding: future_annotations -*-\n",
    ],
)
def test_a_source_rewriting_shim_codec_is_read_as_utf8(cookie: bytes) -> None:
    """FCGF's trainer declares ``# -*- coding: future_fstrings -*-``: the codec the
    future-fstrings package registers at start-up, which reads UTF-8 source. The file is
    linted as UTF-8 Python (here TD201 on its loop), not reported unparsable."""
    body = (
        "import torch\n"
        "def train(model, loader):\n"
        "    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "    for x, y in loader:\n"
        "        loss = torch.nn.functional.mse_loss(model(x), y)\n"
        "        loss.backward()\n"
        "        opt.step()\n"
        "        print(f'{loss.item():.3f} \u2713')\n"
    )
    found = lint_source(cookie + body.encode("utf-8"), "train.py")
    assert [f.code for f in found if f.code in ("TD002", "TD201")] == ["TD201"]


@pytest.mark.parametrize(
    ("shebang", "severity"),
    [
        ("#!/usr/bin/env python2\n", Severity.INFO),
        ("#!/usr/bin/python2.7\n", Severity.INFO),
        ("#!/usr/bin/env python3\n", Severity.ERROR),
        ("# python2 was here\n", Severity.ERROR),
    ],
)
def test_a_file_whose_shebang_asks_for_python2_is_information(
    shebang: str, severity: Severity
) -> None:
    """ESPnet's text2token.py: a helper its recipe runs with python2, kept on purpose;
    Python 3 code that does not parse stays an error."""
    (found,) = lint_source(
        shebang + "import torch\nx = torch.ones(1).cuda(async=True)\n", "helper.py"
    )
    assert found.code == "TD002" and found.severity is severity
    assert ("Python 2 program" in found.message) is (severity is Severity.INFO)


@pytest.mark.parametrize(
    ("source", "severity"),
    [
        ("print 'hello'\n", Severity.INFO),
        ("exec 'x = 1'\nx = 0777\n", Severity.INFO),
        ("import torch\nx = torch.zeros(3).cuda(async=True)\n", Severity.ERROR),
        ("from torchvision import models\nm = models.resnet18(\n", Severity.ERROR),
    ],
)
def test_an_unparsable_file_that_does_not_use_torch_is_information(
    source: str, severity: Severity
) -> None:
    """LLaMA-Adapter vendors tree-sitter-python, whose grammar fixtures are Python 2 and
    broken syntax on purpose: no PyTorch code is lost there. A file that uses torch and
    does not parse stays an error."""
    (found,) = lint_source(source, "fixture.py")
    assert found.code == "TD002" and found.severity is severity
    assert ("does not use torch" in found.message) is (severity is Severity.INFO)


@pytest.mark.parametrize(
    ("source", "severity"),
    [
        ("./Deep3DFaceRecon_pytorch/util/preprocess.py", Severity.INFO),
        ("../../torch_utils/ops/upfirdn2d.py\n", Severity.INFO),
        ("/opt/src/train_torch.py", Severity.INFO),
        ("./torch_utils/ops/upfirdn2d.py x", Severity.ERROR),
        ("import torch\n./torch_utils/ops/upfirdn2d.py\n", Severity.ERROR),
    ],
)
def test_a_symbolic_link_checked_out_as_a_plain_file_is_information(
    source: str, severity: Severity
) -> None:
    """eg3d's ``preprocess.py`` is a git symlink into a submodule; where links cannot be
    made (``core.symlinks=false``, archive tools) the file holds only the target's path.
    That is no broken Python; a path beside code, or more than a path, still is."""
    (found,) = lint_source(source, "preprocess.py")
    assert found.code == "TD002" and found.severity is severity
    assert ("symbolic link" in found.message) is (severity is Severity.INFO)


@pytest.mark.parametrize(
    ("source", "severity"),
    [
        ("import torch\nprint 'epoch', epoch\n", Severity.INFO),
        ("import torch\ntry:\n    pass\nexcept IOError, e:\n    pass\n", Severity.INFO),
        ("#!/usr/bin/env python3\nimport torch\nprint 'epoch'\n", Severity.ERROR),
        ("import torch\nx = torch.zeros(3).cuda(async=True)\n", Severity.ERROR),
    ],
)
def test_a_file_written_in_python_2_is_information(source: str, severity: Severity) -> None:
    """WGAN-GP's scripts (PyTorch 0.2, Python 2.7) print with statements: a Python 2
    program kept as written, not Python 3 code that broke. A Python 3 shebang, or a
    Python 3 program broken by a newer Python (`async` became a keyword), stays an error."""
    (found,) = lint_source(source, "train.py")
    assert found.code == "TD002" and found.severity is severity
    assert ("written in Python 2" in found.message) is (severity is Severity.INFO)


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="Python 3.12 parses type parameters")
@pytest.mark.parametrize(
    "line",
    [
        "class Pipeline[TInput, TOutput]:\n    pass\n",
        "def first[T](items: list[T]) -> T:\n    return items[0]\n",
        "type Batch = dict[str, torch.Tensor]\n",
    ],
)
def test_python_3_12_type_parameters_are_information_on_an_older_python(line: str) -> None:
    """LeRobot (requires Python >= 3.12) writes ``class DataProcessorPipeline[TInput,
    TOutput]``: valid Python that an older interpreter's parser refuses. The file is not
    broken; lint says it cannot read it, as information."""
    (found,) = lint_source("import torch\n" + line, "pipeline.py")
    assert found.code == "TD002" and found.severity is Severity.INFO
    assert "Python 3.12 syntax" in found.message


@pytest.mark.parametrize(
    "source",
    [
        "",
        "\n\n\n",
        "# only a comment\n",
        "\ufeffimport torch\n",
        b"\xef\xbb\xbfimport torch\n",
        b"# -*- coding: latin-1 -*-\nname = '\xe9'\n",
        "x = 1\r\ny = 2\r\n",
        "\x0c\nx = 1\n",
    ],
)
def test_odd_but_valid_files_lint_clean(source: str | bytes) -> None:
    assert lint_source(source, "ok.py").findings == []


@pytest.mark.parametrize("line_end", ["\n", "\r\n"])
def test_a_form_feed_does_not_shift_lines(line_end: str) -> None:
    """Python counts lines at \\r and \\n only; a form feed (old code has them between
    sections) is not a line end, so the snippet and ``# noqa`` stay on the right line."""
    lines = ["import torch", "\x0c", "x = torch.zeros(3)", "x.to('cuda')"]
    source = line_end.join([*lines, "x.to('cuda')  # noqa: TD224", ""])
    found = lint_source(source, "ff.py").findings
    assert [(f.code, f.location.line, f.location.snippet) for f in found] == [
        ("TD224", 4, "x.to('cuda')")
    ]


@pytest.mark.parametrize(
    "magics",
    [
        "!pip install -q timm\n",  # Colab
        "%matplotlib inline\nfiles = !ls data\n",  # an assigned shell escape
        "if True:\n    !nvidia-smi\n",  # indented, alone in its block
        "!deepspeed train.py \\\n    --epochs 3 \\\n    --bf16\n",  # Databricks, continued
        "# %%\n%%bash\necho start\nls -l | wc -l\n# %%\n",  # a cell whose body is shell
        "%%time\nfor _ in range(3):\n    pass\n",  # a cell magic over Python
    ],
)
def test_a_notebook_exported_with_its_magics_is_linted_as_ipython_source(magics: str) -> None:
    """Dolly's train_dolly.py (a Databricks notebook export) runs `!deepspeed ...`: the
    notebook runs its magics, so the file is not broken Python, and the rest is checked
    with every line where it was."""
    source = "import torch\n" + magics + "x = torch.zeros(3)\nx.to('cuda')\n"
    found = lint_source(source, "notebook.py").findings
    assert [(f.code, f.location.line, f.location.snippet) for f in found] == [
        ("TD224", source.count("\n"), "x.to('cuda')")
    ]


def test_a_syntax_error_beside_magics_is_still_reported_where_it_is() -> None:
    source = "import torch\n!pip install timm\ndef f(:\n%matplotlib inline\n"
    (found,) = lint_source(source, "notebook.py")
    assert (found.code, found.location.line) == ("TD002", 3)
    assert found.severity is Severity.ERROR


def test_a_fix_in_a_notebook_export_keeps_its_magic_lines(tmp_path: Path) -> None:
    path = tmp_path / "notebook.py"
    source = (
        "import torch\n!pip install timm\nmodel = torch.nn.Linear(2, 2)\ny = model.forward(x)\n"
    )
    path.write_text(source, encoding="utf-8")
    result = fix(path, unsafe=True, config=LintConfig(), select=["TD206"])
    assert result.applied == 1
    assert path.read_text(encoding="utf-8") == source.replace("model.forward(x)", "model(x)")


def test_deep_but_valid_nesting_does_not_crash() -> None:
    calls = "f(" * 150 + ")" * 150
    chain = "a" + ".b" * 900 + "()"
    blocks = (
        "".join("    " * i + f"for i{i} in x:\n" for i in range(90))
        + "    " * 90
        + "loss.backward()\n"
    )
    for source in (calls, chain, blocks):
        found = lint_source(source, "deep.py")
        assert all(f.code not in ("TD001", "TD002") for f in found)


@pytest.mark.slow
def test_a_huge_file_lints_in_reasonable_time() -> None:
    import time

    body = "".join(
        f"def train_{i}(model, loader, optimizer):\n"
        "    for x, y in loader:\n"
        "        optimizer.zero_grad()\n"
        "        loss = model(x).sum()\n"
        "        loss.backward()\n"
        "        optimizer.step()\n"
        for i in range(4000)
    )
    start = time.perf_counter()
    assert lint_source("import torch\n" + body, "huge.py").findings == []
    assert time.perf_counter() - start < 60


def test_detector_registration_is_visible_to_the_catalogue() -> None:
    from torchdoctor.rules.detectors import registered_detectors

    engine.rule_specs()
    codes = {code for info in registered_detectors(Depth.LINT) for code in info.codes}
    assert {
        "TD201",
        "TD202",
        "TD203",
        "TD204",
        "TD205",
        "TD206",
        "TD207",
        "TD501",
        "TD502",
    } <= codes
