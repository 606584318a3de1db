"""Device and dtype rules: TD102, TD104, TD105, TD106.

TD102 looks for float64 where a program trains, TD104 for class-index targets cast to a
float dtype on their way into a cross-entropy loss, TD105 for the legacy tensor
constructors, and TD106 for constant tensors copied to the device inside a loop.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import cast

from torchdoctor.findings import Applicability, Confidence, Depth, Edit, Finding, Fix, Severity
from torchdoctor.rules.detectors import detector
from torchdoctor.static import torchapi
from torchdoctor.static.bindings import BindingKind
from torchdoctor.static.context import FileContext, Scope
from torchdoctor.static.rules.base import LintRule
from torchdoctor.static.rules.loss import LossKind, conditional, loss_calls
from torchdoctor.static.structure import Item, Loop, ModuleScope
from torchdoctor.static.training import EventKind, classify, grad_disabled_by, loop_events

__all__ = ["insert_keywords", "loop_bound_names", "names_bound_in", "torch_alias"]

_FLOAT64 = frozenset({"torch.float64", "torch.double"})
_FLOAT_DTYPES = _FLOAT64 | {"torch.float32", "torch.float", "torch.float16", "torch.half",
                            "torch.bfloat16"}
_FLOAT_CASTS = frozenset({"float", "double", "half", "bfloat16"})
_REPORTING = frozenset({"item", "cpu", "numpy", "tolist"})
_METRIC_WORDS = frozenset({"total", "sum", "count", "counts", "correct", "metric", "metrics",
                           "acc", "accuracy", "running", "stats", "hist", "histogram",
                           "confusion", "auc", "score", "scores", "tally", "meter"})
_GRADCHECK = frozenset({"torch.autograd.gradcheck", "torch.autograd.gradgradcheck",
                        "torch.autograd.gradcheck.gradcheck",
                        "torch.autograd.gradcheck.gradgradcheck"})


def torch_alias(ctx: FileContext, near: ast.expr | None = None) -> str | None:
    """The local name bound to the ``torch`` module (``torch``, ``T``), if the file has one."""
    root = near
    while isinstance(root, ast.Attribute):
        root = root.value
    if isinstance(root, ast.Name) and ctx.imports.get(root.id) == "torch":
        return root.id
    if ctx.imports.get("torch") == "torch":
        return "torch"
    return next((name for name, target in ctx.imports.items() if target == "torch"), None)


def insert_keywords(ctx: FileContext, call: ast.Call, text: str) -> Edit:
    """An edit adding ``text`` (``"dtype=torch.float32"``) as the last argument of ``call``."""
    location = ctx.location(call)
    line = location.end_line or location.line or 1
    column = (location.end_column or 1) - 1  # the closing parenthesis
    inside = ctx.segment(call)[:-1].rstrip()
    separator = ", " if call.args or call.keywords else ""
    if separator and inside.endswith(","):
        separator = " "
    return Edit(line, column, line, column, separator + text)


# --- TD102 -------------------------------------------------------------------------------


@detector("TD102", depth=Depth.LINT)
class Float64InTraining(LintRule):
    """``.double()``, ``dtype=torch.float64`` and friends in a file that trains a model."""

    requires = ("float64", "double", "DoubleTensor")
    needs_structure = True

    def leave_module(self, module: ModuleScope) -> None:
        ctx = self.ctx
        if _is_test_path(ctx.path):
            return
        scopes: list[tuple[Scope, list[Item]]] = [(None, module.items)]
        scopes += [(f, f.items) for f in module.functions]
        if not any(self._trains(scope, items) for scope, items in scopes):
            return
        for scope, items in scopes:
            if scope is not None and (scope.name.startswith("test") or any(
                    ctx.is_call_to(i.node, *_GRADCHECK, scope=scope) for i in items)):
                continue
            self._scan(scope, items)

    def _trains(self, scope: Scope, items: list[Item]) -> bool:
        for item in items:
            node = item.node
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    node.func.attr == "backward":
                event = classify(self.ctx, item, scope)
                if event is not None and event.kind is EventKind.BACKWARD:
                    return True
        return False

    def _scan(self, scope: Scope, items: list[Item]) -> None:
        accumulated = {t.id for i in items if isinstance(i.node, ast.AugAssign)
                       for t in [i.node.target] if isinstance(t, ast.Name)}
        reporting: set[int] = set()
        statement: ast.AST | None = None
        for item in items:
            node = item.node
            if not isinstance(node, ast.Call):
                statement = node
                continue
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in _REPORTING:
                _mark_chain(func.value, reporting)
            hit = self._float64(node, scope)
            if hit is None or id(node) in reporting or isinstance(func, ast.Attribute) and \
                    isinstance(func.value, ast.Compare):
                continue
            if _metric_statement(statement, node, accumulated) or \
                    grad_disabled_by(self.ctx, item.frames) is not None:
                continue
            self._report(node, hit)

    def _float64(self, call: ast.Call, scope: Scope) -> ast.AST | None:
        """The node that asks for float64 in ``call``, if any."""
        ctx = self.ctx
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr == "double" and not call.args \
                and ctx.qualified_name(func, scope) is None:
            return call
        for keyword in call.keywords:
            if keyword.arg == "dtype" and ctx.qualified_name(keyword.value, scope) in _FLOAT64:
                return keyword.value
        if not call.args:
            return None
        first = call.args[0]
        qualified = ctx.qualified_name(func, scope)
        to_method = isinstance(func, ast.Attribute) and func.attr in ("to", "type") and \
            qualified is None
        if (to_method or qualified == "torch.set_default_dtype") and \
                ctx.qualified_name(first, scope) in _FLOAT64:
            return first
        if qualified == "torch.set_default_tensor_type" and (
                ctx.qualified_name(first, scope) == "torch.DoubleTensor" or
                isinstance(first, ast.Constant) and first.value == "torch.DoubleTensor"):
            return first
        return None

    def _report(self, call: ast.Call, hit: ast.AST) -> None:
        text = self.ctx.segment(call)
        text = text if len(text) <= 60 and "\n" not in text else self.ctx.segment(hit)
        self.report(
            hit,
            f"`{text}` at line {getattr(hit, 'lineno', call.lineno)} puts float64 into a "
            "program that trains with backward(): float64 takes twice the memory of "
            "float32 and runs many times slower on most GPUs, for no gain in accuracy",
            fix_hint="Use float32 (`.float()`, `dtype=torch.float32`); keep float64 only for "
                     "numerical checks, and convert data from NumPy with `.float()`.",
        )


def _is_test_path(path: str) -> bool:
    """Test code (``test_*.py``, ``*_test.py``, ``conftest.py``, a ``tests/`` folder)."""
    *folders, name = path.replace("\\", "/").split("/")
    return name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py" \
        or any(folder in ("test", "tests", "testing") for folder in folders)


def _mark_chain(expr: ast.expr, marked: set[int]) -> None:
    """Mark the calls of a method chain (``x.double().sum()``) as feeding a report."""
    while isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
        marked.add(id(expr))
        expr = expr.func.value


def _metric_statement(statement: ast.AST | None, call: ast.Call, accumulated: set[str]
                      ) -> bool:
    """Whether ``call`` builds a metric: inside ``+=``, or assigned to a counter."""
    if statement is None or not _contains(statement, call):
        return False
    if isinstance(statement, ast.AugAssign):
        return True
    targets = statement.targets if isinstance(statement, ast.Assign) else (
        [statement.target] if isinstance(statement, ast.AnnAssign) else [])
    for target in targets:
        name = target.id if isinstance(target, ast.Name) else (
            target.attr if isinstance(target, ast.Attribute) else "")
        if name in accumulated or set(torchapi.name_tokens(name)) & _METRIC_WORDS:
            return True
    return False


def _contains(outer: ast.AST, inner: ast.expr) -> bool:
    start = (getattr(outer, "lineno", 0), getattr(outer, "col_offset", 0))
    end = (getattr(outer, "end_lineno", 0), getattr(outer, "end_col_offset", 0))
    return start <= (inner.lineno, inner.col_offset) <= end


# --- TD104 -------------------------------------------------------------------------------

_TARGET_WORDS = frozenset({"label", "labels", "target", "targets", "y", "cls", "class",
                           "classes", "idx", "index", "indices", "gt", "truth", "lbl", "tgt",
                           "category", "categories"})
_KEEPS_VALUES = frozenset({"to", "cuda", "cpu", "squeeze", "view", "reshape", "flatten",
                           "detach", "clone", "contiguous"})
_SOFT_WORDS = frozenset({"soft", "onehot", "one", "hot", "prob", "probs", "probabilities",
                         "smooth", "smoothed", "mix", "mixed", "mixup", "cutmix", "dist",
                         "distribution", "teacher", "logits", "weights"})


@detector("TD104", depth=Depth.LINT)
class TargetCastToFloat(LintRule):
    """Class-index targets cast to a float dtype and given to CrossEntropyLoss/NLLLoss."""

    requires = ("cross_entropy", "CrossEntropyLoss", "nll_loss", "NLLLoss")
    needs_structure = True

    def leave_module(self, module: ModuleScope) -> None:
        for call in loss_calls(self.ctx):
            if call.kind not in (LossKind.CROSS_ENTROPY, LossKind.NLL):
                continue
            target, scope = call.target, call.scope
            if isinstance(target, ast.Name):  # `y = y.float()` a few lines up
                found = self.ctx.lookup(target, scope)
                if found is None or found[0].kind is not BindingKind.ASSIGN or conditional(
                        self.ctx, found[0].node, target, found[1]):
                    continue
                target, scope = found[0].value, found[1]
            if not isinstance(target, ast.Call) or not self._casts_to_float(target, scope):
                continue
            assert isinstance(target.func, ast.Attribute)
            confidence = self._class_indices(target.func.value, scope)
            if confidence is not None:
                self._report(call.call, target, call.kind, confidence)

    def _casts_to_float(self, call: ast.Call, scope: Scope) -> bool:
        func = call.func
        if not isinstance(func, ast.Attribute) or self.ctx.qualified_name(func, scope):
            return False
        if func.attr in _FLOAT_CASTS:
            return not call.args and not call.keywords
        if func.attr in ("to", "type"):
            dtype = call.args[0] if call.args else next(
                (k.value for k in call.keywords if k.arg == "dtype"), None)
            return dtype is not None and self.ctx.qualified_name(dtype, scope) in _FLOAT_DTYPES
        return False

    def _class_indices(self, base: ast.expr, scope: Scope, depth: int = 0
                       ) -> Confidence | None:
        """How sure we are that ``base`` holds class indices (``None``: not at all)."""
        ctx = self.ctx
        if depth > 4:
            return None
        if isinstance(base, ast.Call):
            func = base.func
            name = func.attr if isinstance(func, ast.Attribute) else ""
            if name in ("argmax", "long") or ctx.is_call_to(base, "torch.argmax", "torch.randint",
                                                            scope=scope):
                return Confidence.HIGH
            if name in _KEEPS_VALUES and isinstance(func, ast.Attribute):
                return self._class_indices(func.value, scope, depth + 1)
            return None
        if isinstance(base, ast.Subscript):
            key = base.slice
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                return _by_name(key.value)
            return None
        if isinstance(base, ast.Attribute):
            return _by_name(base.attr)
        if not isinstance(base, ast.Name):
            return None
        by_name = _by_name(base.id)
        found = ctx.lookup(base, scope)
        if found is None or _is_soft(base.id):
            return by_name
        binding = found[0]
        if binding.kind is BindingKind.LOOP_TARGET or (
                binding.kind is BindingKind.UNPACKED and not isinstance(binding.value, ast.Call)):
            return Confidence.HIGH
        if binding.kind is BindingKind.ASSIGN and binding.value is not None:
            value = binding.value
            if isinstance(value, (ast.BinOp, ast.IfExp)) or any(
                    isinstance(n, ast.Call) and ctx.is_call_to(
                        n, "torch.nn.functional.one_hot", scope=found[1])
                    for n in ast.walk(value)):
                return None  # mixed (mixup, label smoothing) or one-hot: soft labels
            if isinstance(value, ast.Call):
                return self._class_indices(value, found[1], depth + 1)
            if isinstance(value, (ast.Name, ast.Subscript, ast.Attribute)):
                return self._class_indices(value, found[1], depth + 1) or by_name
        return by_name

    def _report(self, call: ast.Call, target: ast.Call, kind: LossKind,
                confidence: Confidence) -> None:
        ctx = self.ctx
        assert isinstance(target.func, ast.Attribute)
        base = ctx.segment(target.func.value)
        fix = None
        if target.func.attr in _FLOAT_CASTS:
            fix = Fix(f"Keep `{base}` as class indices: `{base}.long()`",
                      (ctx.replace(target, f"{base}.long()"),), Applicability.UNSAFE)
        where = "" if call.lineno == target.lineno else f" (line {call.lineno})"
        self.report(
            target,
            f"`{ctx.segment(target)}` at line {target.lineno} casts class indices to a float "
            f"dtype for {kind.value}{where}: a floating-point target is read as class "
            "probabilities with the input's shape, so the call fails with \"expected target "
            "dtype to be Long\" instead of training",
            fix_hint=f"Pass the class indices as int64: `{base}.long()` (or `{base}` if it "
                     "already is); use a float target only for soft labels of shape (N, C).",
            confidence=confidence, fix=fix,
        )


def _is_soft(name: str) -> bool:
    return bool(set(torchapi.name_tokens(name)) & _SOFT_WORDS)


def _by_name(name: str) -> Confidence | None:
    tokens = set(torchapi.name_tokens(name))
    if tokens & _SOFT_WORDS or not tokens & _TARGET_WORDS:
        return None
    return Confidence.MEDIUM


# --- TD105 -------------------------------------------------------------------------------

_LEGACY = {"Tensor": None, "FloatTensor": "float32", "DoubleTensor": "float64",
           "HalfTensor": "float16", "BFloat16Tensor": "bfloat16", "ByteTensor": "uint8",
           "CharTensor": "int8", "ShortTensor": "int16", "IntTensor": "int32",
           "LongTensor": "int64", "BoolTensor": "bool"}
_SHAPE, _DATA, _EMPTY, _UNKNOWN = "shape", "data", "empty", "unknown"
# In-place initialisers: `torch.FloatTensor(n).normal_()` never exposes uninitialised memory.
_FILLS = frozenset({"fill_", "zero_", "normal_", "uniform_", "random_", "copy_", "bernoulli_",
                    "exponential_", "geometric_", "cauchy_", "log_normal_"})


@detector("TD105", depth=Depth.LINT)
class LegacyConstructor(LintRule):
    """``torch.Tensor(2, 3)``, ``torch.FloatTensor(...)``, ``torch.cuda.LongTensor(...)``."""

    requires = ("Tensor(",)
    call_names = frozenset(_LEGACY) | _FILLS

    def __init__(self, ctx: FileContext, sink: Callable[[Finding], None]) -> None:
        super().__init__(ctx, sink)
        self._filled: set[int] = set()

    def visit_call(self, node: ast.Call) -> None:
        ctx = self.ctx
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in _FILLS:
            self._filled.add(id(func.value))  # visited before the call it fills
            return
        qualified = ctx.qualified_name(func)
        if qualified is None:
            return
        prefix, _, name = qualified.rpartition(".")
        if name not in _LEGACY or prefix not in ("torch", "torch.cuda") or (
                prefix == "torch.cuda" and name == "Tensor"):
            return
        cuda = prefix == "torch.cuda"
        kind = _argument_kind(ctx, node)
        dtype = _LEGACY[name]
        spelled = ctx.segment(node.func)
        filled = id(node) in self._filled
        if kind in (_SHAPE, _EMPTY):
            what = ("an empty tensor" if kind == _EMPTY else
                    "a tensor of uninitialised memory (whatever the allocator returns)")
            message = f"`{spelled}(...)` at line {node.lineno} reads its arguments as a shape " \
                      f"and returns {what}"
            if filled and kind == _SHAPE:
                message += ", filled right away here: only the spelling is legacy"
        else:
            message = (f"`{spelled}(...)` at line {node.lineno} is a legacy constructor: "
                       "integers make it allocate uninitialised memory of that shape, a "
                       "sequence makes it copy data, so one typo changes the meaning")
        if cuda:
            message += "; the `torch.cuda` class also fails on machines without CUDA"
        severity = Severity.WARNING if cuda or (kind == _SHAPE and not filled) else \
            Severity.INFO
        self.report(node, message, severity=severity,
                    fix_hint=_legacy_hint(kind, dtype, cuda),
                    fix=self._fix(node, kind, dtype, cuda))

    def _fix(self, call: ast.Call, kind: str, dtype: str | None, cuda: bool) -> Fix | None:
        ctx = self.ctx
        torch = torch_alias(ctx, call.func)
        if torch is None or kind == _UNKNOWN or any(k.arg is None for k in call.keywords):
            return None
        present = {k.arg for k in call.keywords}
        extra = []
        safe = True
        if dtype is not None and "dtype" not in present:
            extra.append(f"dtype={torch}.{dtype}")
        elif dtype is None and kind == _DATA and not _floats(call.args[0]):
            extra.append(f"dtype={torch}.float32")
            safe = False
        if cuda and "device" not in present:
            extra.append('device="cuda"')
        factory = "tensor" if kind == _DATA else "empty"
        edits = [ctx.replace(call.func, f"{torch}.{factory}")]
        if kind == _EMPTY:
            extra.insert(0, "0")
        if extra:
            edits.append(insert_keywords(ctx, call, ", ".join(extra)))
        return Fix(f"Use `{torch}.{factory}(...)`", tuple(edits),
                   Applicability.SAFE if safe else Applicability.UNSAFE)


def _legacy_hint(kind: str, dtype: str | None, cuda: bool) -> str:
    spelled = "" if dtype is None else f", dtype=torch.{dtype}"
    device = ", device=device" if cuda else ""
    if kind in (_SHAPE, _EMPTY):
        return (f"Use `torch.zeros(...{spelled}{device})` if the values matter, or "
                f"`torch.empty(...{spelled}{device})` if every element is written before use.")
    if kind == _DATA:
        return f"Use `torch.tensor(data{spelled or ', dtype=torch.float32'}{device})`."
    return (f"Say which you mean: `torch.empty(n{spelled}{device})` for a size, "
            f"`torch.as_tensor(data{spelled or ', dtype=torch.float32'}{device})` for data.")


def _argument_kind(ctx: FileContext, call: ast.Call) -> str:
    """Whether a legacy call's arguments are a shape, data, nothing, or cannot be told."""
    args = call.args
    if not args:
        return _EMPTY if not any(k.arg is None for k in call.keywords) else _UNKNOWN
    if len(args) > 1 or isinstance(args[0], ast.Starred):
        return _SHAPE
    arg = args[0]
    if isinstance(arg, ast.Name):
        found = ctx.binding(arg)
        if found is not None and found.kind is BindingKind.ASSIGN and isinstance(
                found.value, (ast.Constant, ast.List, ast.Tuple)):
            arg = found.value
    if isinstance(arg, ast.Constant):
        return _SHAPE if isinstance(arg.value, int) and not isinstance(arg.value, bool) \
            else _UNKNOWN
    if isinstance(arg, (ast.List, ast.Tuple, ast.ListComp)):
        return _DATA
    if isinstance(arg, ast.Attribute) and arg.attr == "shape":
        return _SHAPE
    if isinstance(arg, ast.Subscript) and isinstance(arg.value, ast.Attribute) and \
            arg.value.attr == "shape":
        return _SHAPE
    if isinstance(arg, ast.Call):
        func = arg.func
        if isinstance(func, ast.Name) and func.id == "len":
            return _SHAPE
        if isinstance(func, ast.Attribute) and func.attr in ("size", "numel", "dim"):
            return _SHAPE
        if ctx.is_call_to(arg, "torch.Size"):
            return _SHAPE
    return _UNKNOWN


def _floats(data: ast.expr) -> bool:
    """A literal of numbers, at least one of them a float (so the default dtype is kept)."""
    leaves: list[ast.expr] = []
    stack = [data]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.List, ast.Tuple)):
            stack.extend(node.elts)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            stack.append(node.operand)
        else:
            leaves.append(node)
    numbers = [n.value for n in leaves if isinstance(n, ast.Constant)]
    if len(numbers) != len(leaves):
        return False
    if any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in numbers):
        return False
    return any(isinstance(v, float) for v in numbers)


# --- TD106 -------------------------------------------------------------------------------

_CONSTANT_FACTORIES = frozenset({"torch.tensor", "torch.as_tensor", "torch.ones", "torch.zeros",
                                 "torch.full", "torch.arange", "torch.linspace", "torch.logspace",
                                 "torch.eye", "torch.Tensor", "torch.FloatTensor",
                                 "torch.LongTensor"})
_DEVICE_WORDS = frozenset({"device", "dev", "gpu", "cuda", "rank"})
_ACCELERATORS = ("cuda", "mps", "xpu", "npu", "hpu")


@detector("TD106", depth=Depth.LINT)
class ConstantMovedInLoop(LintRule):
    """``torch.tensor([...]).to(device)`` (or a constant bound before) inside a loop."""

    requires = (".to(", ".cuda(")

    def leave_loop(self, loop: Loop) -> None:
        # Judged from the outermost loop, once it is complete: does it train at all?
        if loop.parent is not None or not any(
                e.kind in (EventKind.BACKWARD, EventKind.OPTIMIZER_STEP)
                for e in loop_events(self.ctx, loop)):
            return
        pending = [loop]
        while pending:
            current = pending.pop()
            pending.extend(current.children)
            self._check_loop(current)

    def _check_loop(self, loop: Loop) -> None:
        bound: set[str] | None = None
        for item in loop.items:
            node = item.node
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("to", "cuda") and loop.is_direct(item)):
                continue
            if bound is None:
                bound = loop_bound_names(loop)
            device = self._device(node, loop.function, bound)
            if device is None:
                continue
            built = self._constant(node.func.value, loop, bound)
            if built is not None:
                self._report(node, built, device, loop)

    def _device(self, call: ast.Call, scope: Scope, bound: set[str]) -> str | None:
        """The device text of a move to an accelerator, or ``None`` (a dtype, the CPU)."""
        assert isinstance(call.func, ast.Attribute)
        arg = call.args[0] if call.args else next(
            (k.value for k in call.keywords if k.arg == "device"), None)
        if call.func.attr == "cuda":
            return "cuda" if arg is None else self.ctx.segment(arg)
        if arg is None or any(isinstance(n, ast.Name) and n.id in bound for n in ast.walk(arg)):
            return None
        text = self.ctx.segment(arg)
        if isinstance(arg, ast.Constant):
            value = arg.value
            if isinstance(value, str) and value.startswith(_ACCELERATORS):
                return text
            return text if isinstance(value, int) and not isinstance(value, bool) else None
        if self.ctx.is_call_to(arg, "torch.device", scope=scope):
            return text
        name = arg.id if isinstance(arg, ast.Name) else (
            arg.attr if isinstance(arg, ast.Attribute) else "")
        if set(torchapi.name_tokens(name)) & _DEVICE_WORDS:
            return text
        return None

    def _constant(self, value: ast.expr, loop: Loop, bound: set[str]) -> ast.Call | None:
        """The factory call that builds ``value`` from constants, when it does."""
        ctx = self.ctx
        if isinstance(value, ast.Name):
            if value.id in bound:
                return None
            found = ctx.lookup(value, loop.function)
            if found is None or found[0].kind is not BindingKind.ASSIGN or not isinstance(
                    found[0].value, ast.Call):
                return None
            value = found[0].value
            if value.lineno >= loop.node.lineno:
                return None
        if not isinstance(value, ast.Call) or not ctx.is_call_to(
                value, *_CONSTANT_FACTORIES, scope=loop.function):
            return None
        for node in ast.walk(value):
            if isinstance(node, ast.Name) and node.id in bound:
                return None
            if isinstance(node, ast.Call) and node is not value and not (
                    ctx.qualified_name(node.func, loop.function) or "").startswith("torch."):
                return None
        return value

    def _report(self, move: ast.Call, built: ast.Call, device: str, loop: Loop) -> None:
        ctx = self.ctx
        assert isinstance(move.func, ast.Attribute)
        moved = ctx.segment(move.func.value)
        factory = ctx.segment(built)
        factory = factory if len(factory) <= 50 and "\n" not in factory else "the tensor"
        where = "" if move.func.value is built else f" (built at line {built.lineno})"
        keyword = f", device={device}" if move.func.attr == "to" else ', device="cuda"'
        suggestion = factory[:-1] + keyword + ")" if factory.endswith(")") else factory
        cost = "a synchronising host-to-device copy" if where else \
            "an allocation plus a synchronising host-to-device copy"
        self.report(
            move,
            f"`{moved}`{where} is the same CPU tensor on every iteration of the loop at line "
            f"{loop.line}, yet line {move.lineno} copies it to `{device}` each time: {cost} "
            "per step",
            fix_hint=f"Build it once, on the device, before the loop: `{suggestion}`.",
            evidence={"loop_line": loop.line, "built_line": built.lineno},
        )


def loop_bound_names(loop: Loop) -> set[str]:
    """Names assigned anywhere in a loop, computed once per loop."""
    cached = loop._cache.get("bound_names")
    if cached is None:
        cached = loop._cache["bound_names"] = names_bound_in(loop.node)
    return cast("set[str]", cached)


def names_bound_in(node: ast.AST) -> set[str]:
    """Names assigned anywhere in a loop (targets, ``+=``, ``with ... as``, ``:=``)."""
    names: set[str] = set()
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, ast.Name) and isinstance(current.ctx, (ast.Store, ast.Del)):
            names.add(current.id)
        elif isinstance(current, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                                  ast.Lambda)) and current is not node:
            continue
        stack.extend(ast.iter_child_nodes(current))
    return names
