"""Sampler rules: TD416 sampler-never-used.

A sampler decides which examples a ``DataLoader`` draws (resampling rare classes, sharding
across ranks). One that is built and bound to a name that nothing reads afterwards does
nothing: most often the loader was built earlier with ``sampler=train_sampler`` while the
name still held ``None``, and rebinding the name later does not reach the loader, so the
run trains on the plain order it was meant to change. A read anywhere after the
assignment, anywhere in a loop around it (its later passes), or in a nested function
counts as a use.
"""

from __future__ import annotations

import ast

from torchdoctor.findings import Confidence, Depth
from torchdoctor.rules.detectors import detector
from torchdoctor.static import torchapi
from torchdoctor.static.analysis.calls import keyword, last_name
from torchdoctor.static.analysis.dataloader import loads
from torchdoctor.static.analysis.loops import enclosing_loops
from torchdoctor.static.context import Scope
from torchdoctor.static.rules.base import LintRule, line_numbers
from torchdoctor.static.structure import FunctionScope, Item, ModuleScope

_LOADER_ARGUMENTS = ("sampler", "batch_sampler")


@detector("TD416", depth=Depth.LINT)
class SamplerNeverUsed(LintRule):
    """``sampler = SomeSampler(dataset)`` that no code reads afterwards."""

    requires = ("Sampler",)
    needs_structure = True

    def leave_module(self, module: ModuleScope) -> None:
        scopes: list[tuple[Scope, list[Item]]] = [(None, module.items)]
        scopes += [(function, function.items) for function in module.functions]
        for scope, items in scopes:
            # Samplers bound to one name in one function (the branches of an `if`) and
            # never read are one cause: reported once, at the first.
            unused: dict[str, list[tuple[ast.Assign, Confidence]]] = {}
            for item in items:
                node = item.node
                if (
                    isinstance(node, ast.Assign)
                    and len(node.targets) == 1
                    and isinstance(node.targets[0], ast.Name)
                    and isinstance(node.value, ast.Call)
                ):
                    name = node.targets[0].id
                    confidence = self._sampler(node.value, scope)
                    if confidence is not None and self._unused(item, node, name, scope):
                        unused.setdefault(name, []).append((node, confidence))
            for name, found in unused.items():
                self._report(name, found, scope)

    def _sampler(self, call: ast.Call, scope: Scope) -> Confidence | None:
        """Whether ``call`` builds a sampler: a class of torch's sampler family (or a
        subclass lint can see), else a class whose name ends in ``Sampler`` that is not
        built on a model (a diffusion model's DDIM or PLMS sampler)."""
        ctx = self.ctx
        found = ctx.family_of(call, scope)
        if found is not None and found[0] == torchapi.SAMPLER:
            return Confidence.HIGH
        type_name = ctx.instance_type(call, scope)
        if type_name is not None and self._visible(type_name):
            return None  # a class of the project that is no torch sampler (an edge sampler)
        func = call.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if not (name.endswith("Sampler") and name[:1].isupper()):
            return None
        # `DDIMSampler(model)`, `PLMSSampler(model=unet)`: a diffusion sampler draws
        # images from a model, not examples for a loader.
        if keyword(call, "model") is not None:
            return None
        if call.args and (
            ctx.is_in_family(call.args[0], torchapi.MODULE, scope)
            or torchapi.hinted_family(last_name(call.args[0])) == torchapi.MODULE
            or self._self_of_a_model(call.args[0], scope)
        ):
            return None
        return Confidence.MEDIUM

    def _self_of_a_model(self, arg: ast.expr, scope: Scope) -> bool:
        """``DDIMSampler(self)`` in a method of a model class (StableSR's latent
        diffusion): the class, or a base of this file, defines ``forward`` or
        ``training_step``, or derives from a ``...Module``."""
        if not (
            isinstance(scope, FunctionScope)
            and scope.owner is not None
            and isinstance(arg, ast.Name)
            and arg.id == scope.self_name
        ):
            return False
        cls: ast.ClassDef | None = scope.owner.node
        for _ in range(8):
            if cls is None:
                return False
            if any(
                isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                and n.name in ("forward", "training_step")
                for n in cls.body
            ) or any(last_name(base).endswith("Module") for base in cls.bases):
                return True
            local = (self.ctx.local_class(last_name(base)) for base in cls.bases)
            found = next((c for c in local if c is not None), None)
            cls = found.node if found is not None else None
        return False

    def _visible(self, type_name: str) -> bool:
        """Whether lint can read the class: defined in this file or another linted one."""
        ctx = self.ctx
        if type_name.startswith("<local>."):
            return ctx.local_class(type_name[len("<local>.") :]) is not None
        return ctx.project is not None and ctx.project.module_class(type_name, ctx.path) is not None

    def _unused(self, item: Item, assign: ast.Assign, name: str, scope: Scope) -> bool:
        """Nothing reads ``name`` after ``assign`` (or in a later pass of a loop around it)."""
        ctx = self.ctx
        root = scope.node if scope is not None else ctx.tree
        loops = enclosing_loops(ctx, item.frames)
        spans = [(loop.node.lineno, loop.node.end_lineno or loop.node.lineno) for loop in loops]
        for node in ast.walk(root):
            if (
                isinstance(node, ast.Name)
                and node.id == name
                and isinstance(node.ctx, ast.Load)
                and (node.lineno > assign.lineno or any(a <= node.lineno <= b for a, b in spans))
            ):
                return False
        # A module-level sampler read by the functions of the file is used.
        return scope is not None or not _read_in_functions(ctx.tree, name)

    def _report(self, name: str, found: list[tuple[ast.Assign, Confidence]], scope: Scope) -> None:
        ctx = self.ctx
        assign, confidence = found[0]
        root = scope.node if scope is not None else ctx.tree
        later = _loader_without_sampler(root, assign.lineno)
        earlier = _loader_given(root, name, assign.lineno)
        if later is not None:
            # LibFewShot: the sampler built for the auxiliary loader, which shuffles
            # instead; it says more than an earlier loader that took another value
            why = (
                f"the DataLoader built after it at line {later.lineno} is given no sampler, "
                "so this sampler never reaches it"
            )
        elif earlier is not None:
            why = (
                f"the DataLoader at line {earlier.lineno} was built with "
                f"`{_keyword_of(earlier, name)}={name}` before this line and keeps the value "
                f"`{name}` had then, so this sampler never reaches it"
            )
        else:
            why = "no DataLoader receives it"
        others = [other.lineno for other, _ in found[1:]]
        evidence: dict[str, object] = {}
        loader = later if later is not None else earlier
        if loader is not None:
            evidence["loader_line"] = loader.lineno
        also = ""
        if others:
            evidence["other_lines"] = others
            also = f" (nor the one bound to `{name}` at {line_numbers(others)})"
        self.report(
            assign,
            f"`{name} = {ctx.segment(assign.value)}` at line {assign.lineno} builds a sampler "
            f"that nothing uses afterwards{also}: {why}, and the data is drawn in the order "
            "the sampler was meant to change",
            fix_hint=f"Build the sampler before the DataLoader and pass it "
            f"(`DataLoader(..., sampler={name})`), or rebuild the loader after choosing it.",
            confidence=Confidence.HIGH
            if any(c is Confidence.HIGH for _, c in found)
            else confidence,
            evidence=evidence or None,
        )


def _read_in_functions(tree: ast.Module, name: str) -> bool:
    return any(
        loads(statement, name)
        for statement in tree.body
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    )


def _loader_given(root: ast.AST, name: str, before: int) -> ast.Call | None:
    """The last call before line ``before`` that was handed ``name`` as its sampler."""
    found = None
    for node in ast.walk(root):
        if (
            isinstance(node, ast.Call)
            and node.lineno < before
            and _keyword_of(node, name) is not None
            and (found is None or node.lineno > found.lineno)
        ):
            found = node
    return found


def _loader_without_sampler(root: ast.AST, after: int) -> ast.Call | None:
    """The first ``DataLoader(...)`` after line ``after`` given no sampler or batch
    sampler, by keyword or position."""
    found = None
    for node in ast.walk(root):
        if (
            isinstance(node, ast.Call)
            and node.lineno > after
            and (last_name(node.func) or "").endswith("DataLoader")
            and len(node.args) <= 3
            and not any(k.arg in (None, *_LOADER_ARGUMENTS) for k in node.keywords)
            and (found is None or node.lineno < found.lineno)
        ):
            found = node
    return found


def _keyword_of(call: ast.Call, name: str) -> str | None:
    for given in call.keywords:
        if (
            given.arg in _LOADER_ARGUMENTS
            and isinstance(given.value, ast.Name)
            and given.value.id == name
        ):
            return given.arg
    return None
