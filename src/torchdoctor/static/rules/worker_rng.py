"""A Dataset's own random generator copied into every worker: TD410 at lint.

A Dataset that builds a generator in ``__init__`` (``self.rng = np.random.RandomState(seed)``,
``np.random.default_rng()``, ``random.Random()``, ``torch.Generator()``) and draws its
augmentations from it in ``__getitem__`` hands each DataLoader worker a copy of the same
generator state: torch reseeds the global ``random``, NumPy and torch generators in each
worker, but not an object the dataset holds. Every worker draws the same crops, flips and
noise, and so does every epoch when the workers restart. Flagged where a DataLoader with
workers reads such a dataset without a ``worker_init_fn`` (which is where one reseeds it).

A generator read only to replace a sample that failed to load (in an ``except`` handler,
under ``if data is None:``, or after ``if data is not None: return data`` in a retry loop)
draws no augmentation, and is left alone.
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
_Body = list[ast.stmt]


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
                _read_on_normal_path(method.node, target.attr)
                for name, method in cls.methods.items()
                if name != "__init__"
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


def _read_on_normal_path(method: ast.FunctionDef | ast.AsyncFunctionDef, attribute: str) -> bool:
    """Whether ``method`` reads ``.attribute`` other than to replace a failed sample.

    A read is on the fallback path in an ``except`` handler, in the body of
    ``if data is None:`` / ``if not ok:``, or after ``if data is not None: return data``
    in the body of the same retry loop (detectron2's ``MapDataset``, which draws another
    index only when the mapper returned None). ``data`` must be a local the method
    assigns, so a switch such as ``if not self.augment:`` still counts as the normal path.
    """
    assigned = {
        n.id for n in ast.walk(method) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }
    return _block_reads(method.body, attribute, assigned, fallback=False)


def _block_reads(
    body: _Body, attribute: str, assigned: set[str], fallback: bool, retry: bool = False
) -> bool:
    """Whether a statement of ``body`` reads ``.attribute`` on the normal path. In the body
    of a retry loop (``retry``), the statements after a success test whose body returns
    are the fallback path; elsewhere such a test is an early exit (a cache hit) and what
    follows it is the normal path still."""
    for statement in body:
        if _statement_reads(statement, attribute, assigned, fallback):
            return True
        if (
            retry
            and isinstance(statement, ast.If)
            and _passes_on_success(statement.test, assigned) is True
            and _always_returns(statement.body)
        ):
            fallback = True
    return False


def _statement_reads(
    statement: ast.stmt, attribute: str, assigned: set[str], fallback: bool
) -> bool:
    if isinstance(statement, (ast.While, ast.For, ast.AsyncFor)):
        head = statement.test if isinstance(statement, ast.While) else statement.iter
        return (
            _expression_reads(head, attribute, fallback)
            or _block_reads(statement.body, attribute, assigned, fallback, retry=True)
            or _block_reads(statement.orelse, attribute, assigned, fallback)
        )
    if isinstance(statement, ast.If):
        success = _passes_on_success(statement.test, assigned)
        return (
            _expression_reads(statement.test, attribute, fallback)
            or _block_reads(statement.body, attribute, assigned, fallback or success is False)
            or _block_reads(statement.orelse, attribute, assigned, fallback or success is True)
        )
    return any(
        _field_reads(value, attribute, assigned, fallback)
        for _, value in ast.iter_fields(statement)
    )


def _field_reads(value: object, attribute: str, assigned: set[str], fallback: bool) -> bool:
    """One field of a statement: a nested block, ``except`` handlers, or expressions."""
    if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
        return _block_reads(value, attribute, assigned, fallback)
    if isinstance(value, list) and value and isinstance(value[0], ast.ExceptHandler):
        return any(
            _block_reads(handler.body, attribute, assigned, fallback=True) for handler in value
        )
    if isinstance(value, list):
        return any(_field_reads(v, attribute, assigned, fallback) for v in value)
    if isinstance(value, ast.match_case):
        return _expression_reads(value.guard, attribute, fallback) or _block_reads(
            value.body, attribute, assigned, fallback
        )
    return isinstance(value, ast.AST) and _expression_reads(value, attribute, fallback)


def _expression_reads(node: ast.AST | None, attribute: str, fallback: bool) -> bool:
    if node is None or fallback:
        return False
    return any(isinstance(n, ast.Attribute) and n.attr == attribute for n in ast.walk(node))


def _passes_on_success(test: ast.expr, assigned: set[str]) -> bool | None:
    """``True`` for ``x is not None`` / ``x``, ``False`` for ``x is None`` / ``not x``,
    where ``x`` is a local the method assigned; ``None`` for any other test."""
    subject, passes = test, True
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        subject, passes = test.operand, False
    elif (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.Is | ast.IsNot)
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value is None
    ):
        subject, passes = test.left, isinstance(test.ops[0], ast.IsNot)
    if isinstance(subject, ast.Name) and subject.id in assigned:
        return passes
    return None


def _always_returns(body: _Body) -> bool:
    last = body[-1]
    if isinstance(last, ast.If):
        return bool(last.orelse) and _always_returns(last.body) and _always_returns(last.orelse)
    return isinstance(last, ast.Return)
