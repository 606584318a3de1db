"""Reproducibility rule: TD906 never-seeded."""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Iterator

from torchdoctor.findings import Applicability, Depth, Fix
from torchdoctor.rules.detectors import detector
from torchdoctor.static import torchapi
from torchdoctor.static.analysis.calls import last_name
from torchdoctor.static.analysis.loops import trains
from torchdoctor.static.branches import is_main_guard
from torchdoctor.static.context import FileContext
from torchdoctor.static.rules.base import LintRule
from torchdoctor.static.structure import Item, Loop, ModuleScope

# Roots of qualified names that are never the project's own helpers.
_LIBRARIES = frozenset(
    {"torch", "numpy", "np", "random", "os", "sys", "math", "time", "json", "logging", "re"}
)
_SETUP_WORDS = frozenset({"init", "initialize", "initialise", "setup", "bootstrap"})
# Project functions read for a seed behind one call: each is a lookup in the index, so
# the bound only stops a runaway; set-up helpers (CrypTen's init) call a dozen or more.
_MAX_HELPERS = 64


@detector("TD906", depth=Depth.LINT)
class NeverSeeded(LintRule):
    """A training script (a main guard, or training at module level) that seeds nothing."""

    requires = ("step(",)

    def leave_module(self, module: ModuleScope) -> None:
        ctx = self.ctx
        main_guard = _main_guard(module.node)
        loops = _outermost_training_loops(ctx, module)
        if not loops or self._seeds():
            return
        if main_guard is None and not any(loop.function is None for loop in loops):
            return  # a library module: whoever runs it seeds
        loop = loops[0]
        self.report(
            loop.node,
            f"The training loop at line {loop.line} runs, but this script never seeds its "
            "random number generators (no `torch.manual_seed`, `random.seed`, "
            "`numpy.random.seed` or `seed_everything` call): initial weights, shuffling "
            "and dropout differ from run to run, so two runs of the same code give "
            "different results and small improvements cannot be told from noise",
            fix_hint="Seed once, first thing: `torch.manual_seed(0)` (it also seeds every "
            "CUDA device), plus `random.seed(0)` and `numpy.random.seed(0)` if "
            "the script uses them.",
            evidence={"loop_line": loop.line},
            fix=self._fix(main_guard),
        )

    def _seeds(self) -> bool:
        """Any call that names a seed: ``manual_seed``, ``seed_everything``, ``set_seed``,
        ``np.random.seed``, ``default_rng(0)``, or a ``seed=`` argument."""
        for item in self._items():
            call = item.node
            if not isinstance(call, ast.Call):
                continue
            func = call.func
            name = last_name(func)
            if "seed" in name.lower() or any(
                "seed" in (k.arg or "").lower() for k in call.keywords
            ):
                return True
            if name in ("default_rng", "Random", "RandomState") and call.args:
                return True
            if self._seeds_inside(call):
                return True
        return False

    def _seeds_inside(self, call: ast.Call) -> bool:
        """An imported helper of the project that seeds (``compute_init()`` calling
        ``torch.manual_seed``), followed a few calls deep; one lint cannot read (outside
        the files linted) counts when its name says it sets things up."""
        ctx = self.ctx
        qualified = ctx.qualified_name(call.func)
        if qualified is None or qualified.split(".")[0] in _LIBRARIES:
            return False
        setup = bool(_SETUP_WORDS & set(torchapi.name_tokens(last_name(call.func))))
        wanted, seen = deque([qualified]), {qualified}
        while wanted:  # breadth first: the helpers called directly are read first
            found = ctx.project.function(wanted.popleft(), near=ctx.path)
            if found is None:
                continue
            setup = False  # read: its body decides
            if any("seed" in called.rpartition(".")[2].lower() for called in found.calls):
                return True
            # sorted: which helpers fit under the bound must not hang on set order
            for called in sorted(found.calls):
                if called not in seen and called.split(".")[0] not in _LIBRARIES:
                    seen.add(called)
                    if len(seen) <= _MAX_HELPERS:
                        wanted.append(called)
        return setup

    def _items(self) -> Iterator[Item]:
        yield from self.ctx.module.items
        for function in self.ctx.module.functions:
            yield from function.items

    def _fix(self, main_guard: ast.If | None) -> Fix | None:
        torch = next((local for local, name in self.ctx.imports.items() if name == "torch"), None)
        if main_guard is None or torch is None:
            return None
        edit = self.ctx.insert_before_statement(main_guard.body[0], f"{torch}.manual_seed(0)")
        return Fix(
            f"Call `{torch}.manual_seed(0)` first thing under the main guard",
            (edit,),
            Applicability.UNSAFE,
        )


def _outermost_training_loops(ctx: FileContext, module: ModuleScope) -> list[Loop]:
    """Training loops not nested in another one, nor run by one through a helper."""
    loops = [
        loop
        for loop in module.all_loops
        if trains(ctx, loop) and (loop.parent is None or not trains(ctx, loop.parent))
    ]
    called = {
        ctx.resolve_local_call(item.node, loop.function)
        for loop in loops
        for item in loop.items
        if isinstance(item.node, ast.Call)
    }
    return [loop for loop in loops if loop.function is None or loop.function not in called]


def _main_guard(module: ast.Module) -> ast.If | None:
    """The module's ``if __name__ == "__main__":`` block, if any."""
    for statement in module.body:
        if isinstance(statement, ast.If) and is_main_guard(statement.test):
            return statement
    return None
