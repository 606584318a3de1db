"""How training batches are drawn and moved: TD407 train-loader-not-shuffled, TD408
non-blocking-without-pin-memory.

Both start from a ``DataLoader(...)`` call of the file
(:mod:`~torchdoctor.static.analysis.dataloader`): a training loader that does not shuffle
(TD407; quiet for one pass over data the program permuted itself), and
``non_blocking=True`` copies of batches that were never pinned (TD408).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from torchdoctor.findings import Applicability, Confidence, Depth, Edit, Fix, Severity
from torchdoctor.rules.detectors import detector
from torchdoctor.static import torchapi
from torchdoctor.static.analysis.calls import insert_keywords
from torchdoctor.static.analysis.dataloader import (
    assigned_name,
    is_false,
    iterated,
    loader_arguments,
    loader_calls,
    loader_of,
)
from torchdoctor.static.bindings import BindingKind
from torchdoctor.static.context import Scope
from torchdoctor.static.rules.base import LintRule
from torchdoctor.static.structure import Item, Loop, ModuleScope
from torchdoctor.static.training import EventKind, loop_events

# --- TD407 -------------------------------------------------------------------------------

_EVAL_WORDS = frozenset(
    {
        "val",
        "valid",
        "validation",
        "test",
        "testing",
        "eval",
        "evaluation",
        "dev",
        "holdout",
        "pred",
        "predict",
        "prediction",
        "inference",
        "infer",
        "calib",
        "calibration",
        "score",
        "scoring",
        "query",
        "gallery",
        "bench",
        "benchmark",
        "export",
        "probe",
        "unlabeled",
        "gen",
    }
)
_ORDERED_WORDS = frozenset(
    {
        "stream",
        "streaming",
        "iterable",
        "iter",
        "iterator",
        "shard",
        "shards",
        "webdataset",
        "wds",
        "sequential",
        "sequence",
        "ordered",
        # data drawn at random on every access: no order to shuffle
        "random",
        "synthetic",
        "fake",
        "dummy",
        "noise",
    }
)
# Datasets whose order the code shows to be by class: what makes an unshuffled loader a
# real problem (a warning), not just a fixed order (information).
_CLASS_ORDERED = ("ImageFolder", "DatasetFolder")
_SORTS = frozenset({"sort", "sorted", "argsort"})


@detector("TD407", depth=Depth.LINT)
class TrainLoaderNotShuffled(LintRule):
    """A DataLoader used for training with neither ``shuffle=True`` nor a sampler."""

    requires = ("DataLoader",)
    needs_structure = True

    def leave_module(self, module: ModuleScope) -> None:
        ctx = self.ctx
        scopes: list[tuple[Scope, list[Item]]] = [(None, module.items)]
        scopes += [(f, f.items) for f in module.functions]
        for scope, items in scopes:
            for call in loader_calls(ctx, items, scope):
                if any(k.arg is None for k in call.keywords) or any(
                    isinstance(a, ast.Starred) for a in call.args
                ):
                    continue  # DataLoader(ds, **kwargs): shuffle or a sampler may be in it
                arguments = loader_arguments(call)
                if not is_false(arguments.get("batch_sampler")):
                    continue
                sampler = arguments.get("sampler")
                without = None if is_false(sampler) else self._none_when(sampler, scope)
                if not is_false(sampler) and without is None:
                    continue
                shuffle = arguments.get("shuffle")
                if shuffle is not None and not is_false(shuffle):
                    continue  # shuffle=True, or decided at run time
                target = assigned_name(items, call)
                confidence = self._training(call, arguments, target, scope)
                if confidence is not None and not self._shuffled_by_hand(
                    call, arguments.get("dataset"), target, scope
                ):
                    self._report(call, arguments, target, confidence, scope, without)

    def _none_when(self, sampler: ast.expr | None, scope: Scope) -> str | None:
        """``sampler=DistributedSampler(ds) if distributed else None`` (directly, through
        a name, nested): the conditions under which a training loader gets no sampler,
        as words. A path that needs a training flag off (``if train else None``) is an
        evaluation loader's, and does not count."""
        for path in self._none_paths(sampler, scope, ()):
            if not any(not holds and _names_training(test) for test, holds in path):
                return " and ".join(
                    f"`{self.ctx.segment(test)}` is {'true' if holds else 'false'}"
                    for test, holds in path
                )
        return None

    def _none_paths(
        self, value: ast.expr | None, scope: Scope, path: tuple[tuple[ast.expr, bool], ...]
    ) -> Iterator[tuple[tuple[ast.expr, bool], ...]]:
        if isinstance(value, ast.Name) and len(path) < 3:
            value = self._assigned(value, scope)
        if isinstance(value, ast.IfExp) and len(path) < 3:
            yield from self._none_paths(value.body, scope, (*path, (value.test, True)))
            yield from self._none_paths(value.orelse, scope, (*path, (value.test, False)))
        elif path and value is not None and is_false(value):
            yield path

    def _training(
        self, call: ast.Call, arguments: dict[str, ast.expr], target: ast.expr | None, scope: Scope
    ) -> Confidence | None:
        """How sure we are that this loader feeds training (``None``: it does not)."""
        words = set(_words(target)) | set(_words(arguments.get("dataset")))
        if words & (_EVAL_WORDS | _ORDERED_WORDS) or self._iterable(
            arguments.get("dataset"), scope
        ):
            return None
        if "train" in words or "training" in words:
            return Confidence.HIGH
        if any(_names_training(n) for n in _flag_tests(arguments.get("sampler"))):
            return Confidence.MEDIUM  # sampler=... if train else None: a training loader
        for loop in self._feeding_loops(call, target, scope):
            if any(
                e.kind is EventKind.BACKWARD for e in loop_events(self.ctx, loop, forwards=False)
            ):
                return Confidence.MEDIUM
        return None

    def _feeding_loops(self, call: ast.Call, target: ast.expr | None, scope: Scope) -> list[Loop]:
        """The ``for`` loops (of the loader's own function) that iterate the loader."""
        loops = []
        for loop in self.ctx.module.all_loops:
            node = loop.node
            if not isinstance(node, (ast.For, ast.AsyncFor)):
                continue
            source = iterated(self.ctx, node.iter, loop.function)
            if source is call or (
                isinstance(target, ast.Name)
                and isinstance(source, ast.Name)
                and source.id == target.id
                and loop.function is scope
            ):
                loops.append(loop)
        return loops

    def _shuffled_by_hand(
        self, call: ast.Call, dataset: ast.expr | None, target: ast.expr | None, scope: Scope
    ) -> bool:
        """One pass over data the program already put in random order:
        ``TensorDataset(x[perm], y[perm])`` with ``perm = torch.randperm(n)``, read by
        loops that no other loop of the function repeats (no epochs to reorder)."""
        loops = self._feeding_loops(call, target, scope)
        if not loops or any(loop.parent is not None for loop in loops):
            return False
        if isinstance(dataset, ast.Name):
            dataset = self._assigned(dataset, scope)
        return (
            isinstance(dataset, ast.Call)
            and bool(dataset.args)
            and self.ctx.is_call_to(dataset, "torch.utils.data.TensorDataset", scope=scope)
            and all(self._permuted(tensor, scope) for tensor in dataset.args)
        )

    def _permuted(self, expr: ast.expr, scope: Scope, depth: int = 0) -> bool:
        """``x[perm]`` for a random permutation ``perm`` (directly or through names)."""
        if isinstance(expr, ast.Name) and depth < 4:
            value = self._assigned(expr, scope)
            return value is not None and self._permuted(value, scope, depth + 1)
        if not isinstance(expr, ast.Subscript):
            return False
        index: ast.expr | None = expr.slice
        if isinstance(index, ast.Name):
            index = self._assigned(index, scope)
        return isinstance(index, ast.Call) and getattr(
            index.func, "attr", getattr(index.func, "id", None)
        ) in ("randperm", "permutation")

    def _assigned(self, name: ast.Name, scope: Scope) -> ast.expr | None:
        found = self.ctx.lookup(name, scope)
        if found is None or found[0].kind is not BindingKind.ASSIGN:
            return None
        return found[0].value

    def _iterable(self, dataset: ast.expr | None, scope: Scope) -> bool:
        """An ``IterableDataset`` (which cannot be shuffled by the loader)."""
        if dataset is None:
            return False
        type_name = self.ctx.instance_type(dataset, scope)
        if type_name is None:
            return False
        if "Iterable" in type_name or "datapipes" in type_name:
            return True
        return type_name.startswith("<local>.") and self.ctx.is_family(
            type_name, "torch.utils.data.IterableDataset"
        )

    def _report(
        self,
        call: ast.Call,
        arguments: dict[str, ast.expr],
        target: ast.expr | None,
        confidence: Confidence,
        scope: Scope,
        without: str | None = None,
    ) -> None:
        ctx = self.ctx
        name = ctx.segment(target) if target is not None else "DataLoader(...)"
        shuffle = arguments.get("shuffle")
        if shuffle is not None:
            edit: Edit = ctx.replace(shuffle, "True")
            said = "`shuffle=False`"
        else:
            edit = insert_keywords(ctx, call, "shuffle=True")
            said = "no `shuffle=True`"
        ordered = self._ordered(arguments.get("dataset"), scope, 0) and not self._labels_unused(
            call, target, scope
        )
        self.report(
            call,
            f"`{name}` at line {call.lineno} feeds training but has {said} and "
            + (f"no sampler when {without}" if without else "no sampler")
            + ": "
            "every epoch visits the examples in the same order"
            + (
                ", and the dataset is stored sorted (by class or key), so every batch holds "
                "one class and the model learns the order"
                if ordered
                else ", so batches are correlated when the data is stored sorted (by class or "
                "source)"
            ),
            severity=None if ordered else Severity.INFO,
            fix_hint=(
                "Shuffle when there is no sampler: `shuffle=(sampler is None)` (a sampler and "
                "`shuffle=True` together are refused by DataLoader)."
                if without
                else "Pass `shuffle=True` to the training DataLoader (keep validation and "
                "test loaders unshuffled), or a sampler such as `DistributedSampler`."
            ),
            confidence=confidence,
            # With a sampler on the other path, `shuffle=True` would raise there: no edit.
            fix=None
            if without
            else Fix("Shuffle the training loader", (edit,), Applicability.UNSAFE),
        )

    def _labels_unused(self, call: ast.Call, target: ast.expr | None, scope: Scope) -> bool:
        """Every loop over the loader throws the labels away (``for x, _ in loader``):
        an order by class cannot make a batch one-sided."""
        loops = self._feeding_loops(call, target, scope)
        return bool(loops) and all(_discards_labels(loop.node) for loop in loops)

    def _ordered(self, dataset: ast.expr | None, scope: Scope, depth: int) -> bool:
        """Whether the code shows the dataset stored in a sorted order: an
        ``ImageFolder`` (one folder per class, read class by class), or data built with a
        ``sort`` (directly, or inside the local function that builds the dataset)."""
        if dataset is None or depth > 3:
            return False
        if isinstance(dataset, ast.Name):
            value = self._assigned(dataset, scope)
            return value is not None and self._ordered(value, scope, depth + 1)
        if not isinstance(dataset, ast.Call):
            return False
        qualified = self.ctx.qualified_name(dataset.func, scope) or ""
        if qualified.endswith(_CLASS_ORDERED):
            return True
        local = self.ctx.resolve_local_call(dataset, scope)
        where: ast.AST = local.node if local is not None else dataset
        return any(
            isinstance(n, ast.Call)
            and (
                getattr(n.func, "attr", None) in _SORTS
                or getattr(n.func, "id", None) in _SORTS
                or (self.ctx.qualified_name(n.func, scope) or "").endswith(_CLASS_ORDERED)
            )
            for n in ast.walk(where)
        )


def _discards_labels(loop: ast.AST) -> bool:
    target = getattr(loop, "target", None)
    if (
        isinstance(target, ast.Tuple)
        and len(target.elts) == 2
        and isinstance(target.elts[1], ast.Tuple)
    ):  # for i, (x, _) in enumerate(loader)
        target = target.elts[1]
    return (
        isinstance(target, ast.Tuple)
        and len(target.elts) == 2
        and isinstance(target.elts[1], ast.Name)
        and target.elts[1].id == "_"
    )


def _names_training(test: ast.expr) -> bool:
    """A flag that says the loader is for training: ``train``, ``is_training``."""
    return isinstance(test, (ast.Name, ast.Attribute)) and bool(
        {"train", "training"} & set(_words(test))
    )


def _flag_tests(value: ast.expr | None) -> list[ast.expr]:
    """The tests of conditional expressions in ``value`` (``x if train else None``)."""
    return [n.test for n in ast.walk(value) if isinstance(n, ast.IfExp)] if value else []


def _words(expr: ast.expr | None) -> list[str]:
    """Words of the names in an expression (``self.train_loader`` -> train, loader)."""
    if expr is None:
        return []
    words: list[str] = []
    for node in ast.walk(expr):
        if isinstance(node, ast.Name):
            words += torchapi.name_tokens(node.id)
        elif isinstance(node, ast.Attribute):
            words += torchapi.name_tokens(node.attr)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            words += torchapi.name_tokens(node.value)
    return words


# --- TD408 -------------------------------------------------------------------------------


@detector("TD408", depth=Depth.LINT)
class NonBlockingWithoutPinMemory(LintRule):
    """``batch.to(device, non_blocking=True)`` in a loop over a loader that does not pin."""

    requires = ("non_blocking",)

    def leave_loop(self, loop: Loop) -> None:
        node = loop.node
        if not isinstance(node, (ast.For, ast.AsyncFor)):
            return
        ctx = self.ctx
        loader = loader_of(ctx, node.iter, loop.function)
        if loader is None:
            return
        pin = loader_arguments(loader).get("pin_memory")
        if not is_false(pin):
            return
        derived = _batch_names(loop)
        fix = self._fix(loader, pin)
        for item in loop.items:
            call = item.node
            if (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and _non_blocking(call)
                and _from_batch(call.func.value, derived)
            ):
                self._report(call, loader, fix)

    def _fix(self, loader: ast.Call, pin: ast.expr | None) -> Fix:
        ctx = self.ctx
        edit = (
            ctx.replace(pin, "True")
            if pin is not None
            else insert_keywords(ctx, loader, "pin_memory=True")
        )
        return Fix("Pin the loader's batches: `pin_memory=True`", (edit,), Applicability.UNSAFE)

    def _report(self, call: ast.Call, loader: ast.Call, fix: Fix) -> None:
        moved = self.ctx.segment(call)
        moved = moved if len(moved) <= 60 and "\n" not in moved else "the batch"
        self.report(
            call,
            f"`{moved}` at line {call.lineno} asks for an asynchronous copy, but the batch "
            f"comes from the DataLoader at line {loader.lineno}, which does not pin memory: "
            "from pageable memory the copy is staged through a pinned buffer by the CPU and "
            "does not overlap with compute",
            fix_hint="Pass `pin_memory=True` to the DataLoader, or drop `non_blocking=True`.",
            fix=fix,
        )


def _non_blocking(call: ast.Call) -> bool:
    func = call.func
    if not isinstance(func, ast.Attribute) or func.attr not in ("to", "cuda"):
        return False
    flag = next((k.value for k in call.keywords if k.arg == "non_blocking"), None)
    if flag is None and func.attr == "cuda" and len(call.args) == 2:
        flag = call.args[1]
    return isinstance(flag, ast.Constant) and flag.value is True


def _from_batch(receiver: ast.expr, derived: set[str]) -> bool:
    """Whether a moved value comes from the batch (and was not pinned by hand)."""
    node = receiver
    while True:
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Attribute) and node.func.attr == "pin_memory":
                return False
            node = node.func.value if isinstance(node.func, ast.Attribute) else node.func
        elif isinstance(node, (ast.Subscript, ast.Attribute)):
            node = node.value
        else:
            return isinstance(node, ast.Name) and node.id in derived


def _batch_names(loop: Loop) -> set[str]:
    """Names holding the batch or parts of it: the loop target and what is unpacked from it."""
    assert isinstance(loop.node, (ast.For, ast.AsyncFor))
    derived = {n.id for n in ast.walk(loop.node.target) if isinstance(n, ast.Name)}
    for item in loop.items:
        node = item.node
        if isinstance(node, ast.Assign) and any(
            isinstance(n, ast.Name) and n.id in derived for n in ast.walk(node.value)
        ):
            for target in node.targets:
                derived |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
    for node in ast.walk(loop.node):
        if isinstance(node, ast.comprehension) and any(
            isinstance(n, ast.Name) and n.id in derived for n in ast.walk(node.iter)
        ):
            derived |= {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
    return derived
