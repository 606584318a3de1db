"""A Dataset's own random generator copied into every worker: TD410 at lint.

A Dataset that builds a generator in ``__init__`` (``self.rng = np.random.RandomState(seed)``,
``np.random.default_rng()``, ``random.Random()``, ``torch.Generator()``) and draws its
augmentations from it in ``__getitem__`` hands each DataLoader worker a copy of the same
generator state: torch reseeds the global ``random``, NumPy and torch generators in each
worker, but not an object the dataset holds. Every worker draws the same crops, flips and
noise, and so does every epoch when the workers restart. Flagged where a DataLoader with
workers reads such a dataset without a ``worker_init_fn`` (which is where one reseeds it).
"""

from __future__ import annotations

import ast

from torchdoctor.findings import Depth
from torchdoctor.rules.detectors import detector
from torchdoctor.static.analysis.dataloader import loader_arguments, loader_calls, worker_count
from torchdoctor.static.context import Scope
from torchdoctor.static.rules.base import LintRule
from torchdoctor.static.structure import ClassScope, ModuleScope

_GENERATORS = frozenset(
    {
        "numpy.random.RandomState",
        "numpy.random.default_rng",
        "numpy.random.Generator",
        "random.Random",
        "torch.Generator",
    }
)
_DATASET = "torch.utils.data.Dataset"


@detector("TD410", depth=Depth.LINT)
class DatasetGeneratorSharedByWorkers(LintRule):
    """``self.rng = np.random.RandomState(0)`` in a Dataset read by several workers."""

    requires = ("num_workers",)
    needs_structure = True

    def leave_module(self, module: ModuleScope) -> None:
        ctx = self.ctx
        held = {
            f"<local>.{cls.node.name}": found
            for cls in module.classes
            if (found := self._generator(cls)) is not None
        }
        if not held:
            return
        for scope, items in module.bodies():
            for call in loader_calls(ctx, items, scope):
                arguments = loader_arguments(call)
                dataset = arguments.get("dataset")
                kind = ctx.instance_type(dataset, scope) if dataset is not None else None
                if kind not in held or "worker_init_fn" in arguments:
                    continue
                if worker_count(ctx, arguments.get("num_workers"), scope) == 0:
                    continue
                self._report(call, held[kind], scope)

    def _generator(self, cls: ClassScope) -> tuple[str, ast.Call] | None:
        """``(attribute, constructor)`` of a generator the Dataset builds in ``__init__``
        and reads in another method."""
        ctx = self.ctx
        if not ctx.is_family(f"<local>.{cls.node.name}", _DATASET):
            return None
        init = cls.methods.get("__init__")
        if init is None:
            return None
        for item in init.items:
            node = item.node
            if not (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.value, ast.Call)
                and ctx.qualified_name(node.value.func, init) in _GENERATORS
            ):
                continue
            target = node.targets[0]
            if not (
                isinstance(target, ast.Attribute)
                and isinstance(target.value, ast.Name)
                and target.value.id == init.self_name
            ):
                continue
            read = any(
                isinstance(n, ast.Attribute) and n.attr == target.attr
                for name, method in cls.methods.items()
                if name != "__init__"
                for n in ast.walk(method.node)
            )
            if read:
                return target.attr, node.value
        return None

    def _report(self, call: ast.Call, held: tuple[str, ast.Call], scope: Scope) -> None:
        ctx = self.ctx
        attribute, built = held
        self.report(
            call,
            f"`{ctx.segment(call.func)}(...)` at line {call.lineno} starts worker processes "
            f"over a dataset that draws from its own generator `self.{attribute} = "
            f"{ctx.segment(built)}` (line {built.lineno}): each worker gets a copy of the "
            "same generator state, which torch does not reseed, so every worker draws the "
            "same random augmentations, and again every epoch the workers restart",
            fix_hint="Reseed it in a `worker_init_fn` from the worker's seed "
            "(`info = torch.utils.data.get_worker_info(); info.dataset."
            f"{attribute} = np.random.default_rng(info.seed)`), or draw from the global "
            "`np.random` / `torch` generators, which torch seeds per worker.",
        )
