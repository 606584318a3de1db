"""cuDNN flags: TD705 cudnn-benchmark-with-deterministic."""

from __future__ import annotations

import ast
import functools
import io
import re
import tokenize
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from torchdoctor.findings import Applicability, Confidence, Depth, Finding, Fix, Severity
from torchdoctor.rules.detectors import detector
from torchdoctor.static import torchapi
from torchdoctor.static.analysis.related_files import importing_paths
from torchdoctor.static.analysis.spawned import launcher_only, workers_only
from torchdoctor.static.context import FileContext
from torchdoctor.static.files import read_source
from torchdoctor.static.rules.base import LintRule
from torchdoctor.static.structure import Frame, FrameKind

_BENCHMARK = torchapi.CUDNN_BENCHMARK
_DETERMINISTIC = torchapi.CUDNN_DETERMINISTIC


@dataclass(frozen=True, slots=True)
class _Setting:
    """One assignment of a cuDNN flag, or a call that sets one."""

    flag: str
    on: bool
    node: ast.AST
    value: ast.expr | None
    frames: tuple[Frame, ...]

    @property
    def line(self) -> int:
        return getattr(self.node, "lineno", 0)


@detector("TD705", depth=Depth.LINT)
class CudnnBenchmarkWithDeterministic(LintRule):
    """``cudnn.benchmark = True`` in a program that also asks cuDNN for determinism."""

    requires = ("benchmark",)
    call_names = frozenset({"use_deterministic_algorithms", "flags"})

    def __init__(self, ctx: FileContext, sink: Callable[[Finding], None]) -> None:
        super().__init__(ctx, sink)
        self._settings: list[_Setting] = []

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            if not isinstance(target, ast.Attribute):
                continue
            flag = self.ctx.qualified_name(target)
            if flag in (_BENCHMARK, _DETERMINISTIC):
                self._settings.append(
                    _Setting(flag, _is_true(node.value), node, node.value, self.ctx.frames)
                )

    def visit_call(self, node: ast.Call) -> None:
        ctx = self.ctx
        if ctx.is_call_to(node, "torch.use_deterministic_algorithms"):
            mode = (
                node.args[0]
                if node.args
                else next((k.value for k in node.keywords if k.arg == "mode"), None)
            )
            self._settings.append(_Setting(_DETERMINISTIC, _is_true(mode), node, mode, ctx.frames))
        elif ctx.is_call_to(node, "torch.backends.cudnn.flags"):
            values = {k.arg: k.value for k in node.keywords}
            if _is_true(values.get("benchmark")) and _is_true(values.get("deterministic")):
                self._settings.append(_Setting(_DETERMINISTIC, True, node, None, ctx.frames))
                self._settings.append(
                    _Setting(_BENCHMARK, True, node, values["benchmark"], ctx.frames)
                )

    def leave_module(self, module: object) -> None:
        for bench in self._effective(_BENCHMARK):
            partner = next(
                (
                    d
                    for d in self._effective(_DETERMINISTIC)
                    if not _exclusive(bench.frames, d.frames)
                    and not self._reset_before(d)
                    and not self._other_processes(bench, d)
                ),
                None,
            )
            if partner is not None:
                self._report(bench, partner)

    def _effective(self, flag: str) -> Iterator[_Setting]:
        """Settings that turn ``flag`` on and are not turned off again later in the same
        function on the same path."""
        own = [s for s in self._settings if s.flag == flag]
        for setting in own:
            if not setting.on:
                continue
            function = self.ctx.function_of(setting.frames)
            undone = any(
                not later.on
                and later.line > setting.line
                and self.ctx.function_of(later.frames) is function
                and not _exclusive(setting.frames, later.frames)
                for later in own
            )
            if not undone:
                yield setting

    def _other_processes(self, first: _Setting, second: _Setting) -> bool:
        """One setting runs only in the process that launches workers with
        ``mp.spawn``, the other only in the workers: a spawned worker is a fresh
        interpreter that inherits no cuDNN flag from its launcher (Context-Aware-
        Consistency sets ``benchmark`` in the main guard, ``deterministic`` in the
        spawned ``main``)."""
        ctx = self.ctx
        return any(
            launcher_only(ctx, a.frames) and workers_only(ctx, ctx.function_of(b.frames))
            for a, b in ((first, second), (second, first))
        )

    def _reset_before(self, asked: _Setting) -> bool:
        """Whether benchmark mode is switched off just before determinism is asked for:
        ``benchmark = False`` earlier in the same function, in a block that holds the
        request (so it has run whenever the request runs). Whatever set benchmark on
        elsewhere, the two are never on together."""
        function = self.ctx.function_of(asked.frames)
        around = {id(frame.node) for frame in asked.frames}
        return any(
            s.flag == _BENCHMARK
            and not s.on
            and isinstance(s.value, ast.Constant)
            and s.line <= asked.line
            and self.ctx.function_of(s.frames) is function
            and all(id(frame.node) in around for frame in s.frames)
            for s in self._settings
        )

    def _report(self, bench: _Setting, partner: _Setting) -> None:
        ctx = self.ctx
        same_scope = ctx.function_of(bench.frames) is ctx.function_of(partner.frames)
        asked = ctx.segment(partner.node).split("\n")[0]
        fix = None
        if isinstance(bench.node, ast.Assign) and bench.value is not None:
            fix = Fix(
                "Set `cudnn.benchmark = False`",
                (ctx.replace(bench.value, "False"),),
                Applicability.UNSAFE,
            )
        # Run-to-run equality matters for training: a program of its own (an inference
        # demo, an evaluation script) that takes no training step differs at most in the
        # last digits of its outputs; a maintainer leaves it. So does a module that only
        # such programs import (videocomposer's inference modules, run by `run_net.py`).
        # A module imported by nothing lint sees may be the setup of any training script:
        # judged as before.
        untrained = not _trains(ctx.source) and (
            _runs_itself(ctx.tree, ctx.source) or _run_only_by_untrained_programs(ctx)
        )
        self.report(
            bench.node,
            f"cuDNN benchmarking is switched on at line {bench.line} while `{asked}` "
            f"(line {partner.line}) asks for deterministic results: benchmark mode picks "
            "each convolution's algorithm by timing the candidates, and timings vary, so "
            "two runs with the same seed can use different algorithms and give different "
            "results"
            + (
                "; this program takes no training step, so only the last digits of its "
                "outputs can differ"
                if untrained
                else ""
            ),
            fix_hint="Set `torch.backends.cudnn.benchmark = False` when you need "
            "reproducible runs; keep benchmark mode (and drop the deterministic "
            "flag) only when speed matters more.",
            evidence={"deterministic_line": partner.line},
            confidence=Confidence.HIGH if same_scope else Confidence.MEDIUM,
            fix=fix,
            severity=Severity.INFO if untrained else None,
        )


# What shows a file trains, itself or through what it calls: a backward pass (also
# Lightning's manual one and autograd.grad; not an autograd.Function's `def backward`),
# an optimizer built or stepped, a framework's fit or training_step, a call to a
# `train...` function or method (a trainer class of another file), a Trainer.
_TRAINING_STEP = re.compile(
    r"(?<!def )\bbackward\b|autograd\.grad\b|\boptim\.(?:[A-Z]|lr_scheduler)|\.step\("
    r"|\.fit\(|training_step|\btrain\w*\(|Trainer\b"
)
# Lines that only name things: imports (an evaluation script importing `torch.optim` it
# never uses, Relation-Shape-CNN's voting scripts), and comments.
_IMPORT_LINE = re.compile(r"^\s*(?:import|from)\s")


def _trains(source: str) -> bool:
    """Whether the file's code, its imports, comments and strings (docstrings, help
    texts) left out, shows training."""
    code = "\n".join(line for line in source.splitlines() if not _IMPORT_LINE.match(line))
    try:
        tokens = [
            t._replace(string='""') if t.type == tokenize.STRING else t
            for t in tokenize.generate_tokens(io.StringIO(code).readline)
            if t.type != tokenize.COMMENT
        ]
        code = tokenize.untokenize(tokens)
    except (tokenize.TokenError, IndentationError, SyntaxError, ValueError):
        code = "\n".join(line.split("#", 1)[0] for line in code.splitlines())
    return _TRAINING_STEP.search(code) is not None


def _run_only_by_untrained_programs(ctx: FileContext) -> bool:
    """The project's modules importing this file are all programs of their own that take
    no training step (none at all: unknown, not shown)."""
    importers = importing_paths(ctx.project, ctx.path)
    return bool(importers) and all(
        ctx.project.remember(f"untrained-program:{path}", functools.partial(_untrained, path))
        for path in importers
    )


def _untrained(path: str) -> bool:
    data = read_source(path)
    if not isinstance(data, bytes):
        return False
    source = data.decode("utf-8", "replace")
    try:
        tree = ast.parse(source, path)
    except (SyntaxError, ValueError):
        return False
    return _runs_itself(tree, source) and not _trains(source)


def _runs_itself(tree: ast.Module, source: str) -> bool:
    """The file is a program of its own: it has a ``__main__`` block or parses its
    command line at module level, rather than being a module another program imports."""
    if "__main__" in source:
        return True
    return any(
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "parse_args"
        for statement in tree.body
        if not isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        for node in ast.walk(statement)
    )


def _is_true(value: ast.expr | None) -> bool:
    return isinstance(value, ast.Constant) and value.value is True


def _exclusive(first: tuple[Frame, ...], second: tuple[Frame, ...]) -> bool:
    """Whether two places sit in different branches of the same ``if``."""
    branches = {
        id(f.node): f.kind for f in first if f.kind in (FrameKind.IF_BODY, FrameKind.IF_ELSE)
    }
    return any(id(f.node) in branches and branches[id(f.node)] is not f.kind for f in second)
