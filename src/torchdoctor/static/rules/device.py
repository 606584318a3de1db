"""Device rules: TD105 legacy-tensor-constructor, TD106 constant-tensor-moved-in-loop.

TD105 looks for the legacy tensor constructors (``torch.Tensor(2, 3)``,
``torch.FloatTensor(...)``), TD106 for constant tensors copied to the device inside a loop.
"""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Callable, Container, Iterator
from typing import TypeGuard, cast

from torchdoctor.findings import Applicability, Depth, Finding, Fix, Severity
from torchdoctor.rules.detectors import detector
from torchdoctor.static import torchapi
from torchdoctor.static.analysis.callers import local_method
from torchdoctor.static.analysis.calls import insert_keywords, last_name, torch_alias
from torchdoctor.static.analysis.loops import loop_bound_names
from torchdoctor.static.analysis.model_init_loops import filled_by_a_model_loop
from torchdoctor.static.analysis.name_initialisers import initialised_by_name, read_by_name
from torchdoctor.static.bindings import BindingKind
from torchdoctor.static.context import FileContext, Scope
from torchdoctor.static.names import is_none
from torchdoctor.static.rules.base import LintRule
from torchdoctor.static.structure import Loop
from torchdoctor.static.training import EventKind, loop_events

# --- TD105 -------------------------------------------------------------------------------

_LEGACY = {
    "Tensor": None,
    "FloatTensor": "float32",
    "DoubleTensor": "float64",
    "HalfTensor": "float16",
    "BFloat16Tensor": "bfloat16",
    "ByteTensor": "uint8",
    "CharTensor": "int8",
    "ShortTensor": "int16",
    "IntTensor": "int32",
    "LongTensor": "int64",
    "BoolTensor": "bool",
}
_SHAPE, _DATA, _EMPTY, _UNKNOWN = "shape", "data", "empty", "unknown"
# The in-place initialisers of `torch.nn.init`: each writes every element of its argument.
_INIT_FUNCTIONS = frozenset(
    {"uniform_", "normal_", "trunc_normal_", "constant_", "ones_", "zeros_", "eye_", "dirac_"}
    | {"xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_"}
    | {"orthogonal_", "sparse_"}
)
# In-place initialisers: `torch.FloatTensor(n).normal_()` never exposes uninitialised memory.
_FILLS = frozenset(
    {
        "fill_",
        "zero_",
        "normal_",
        "uniform_",
        "random_",
        "copy_",
        "bernoulli_",
        "exponential_",
        "geometric_",
        "cauchy_",
        "log_normal_",
    }
)


@detector("TD105", depth=Depth.LINT)
class LegacyConstructor(LintRule):
    """``torch.Tensor(2, 3)``, ``torch.FloatTensor(...)``, ``torch.cuda.LongTensor(...)``."""

    requires = ("Tensor(",)
    call_names = frozenset(_LEGACY) | _FILLS | _INIT_FUNCTIONS

    def __init__(self, ctx: FileContext, sink: Callable[[Finding], None]) -> None:
        super().__init__(ctx, sink)
        self._filled: set[int] = set()
        # Shape constructors whose memory is never shown to be read before it is written:
        # handed to a function that may fill it, written by the class or function somewhere
        # (``reset_parameters()``, ``narrow(...).copy_()``), or never read at all.
        self._unproven: set[int] = set()

    def visit_Assign(self, node: ast.Assign) -> None:
        if len(node.targets) == 1:
            self._initialised_later(node, node.targets[0], node.value)
            self._judge_holder(node, node.targets[0], node.value)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self._initialised_later(node, node.target, node.value)
            self._judge_holder(node, node.target, node.value)

    def visit_Expr(self, node: ast.Expr) -> None:
        """``self.register_buffer("eps", torch.FloatTensor(n))`` holds the memory in
        ``self.eps``; ``match(..., loc_t)`` or ``dist.all_reduce(torch.FloatTensor(1))``
        hands it to a call that may write it (and read it only after)."""
        call = node.value
        if not isinstance(call, ast.Call):
            return
        for argument in [*call.args, *(k.value for k in call.keywords)]:
            # cheap first: only a call can hold a legacy constructor's memory
            held = _held_call(argument) if argument.__class__ is ast.Call else None
            if held is None:
                continue
            name = call.args[0] if call.args else None
            if (
                last_name(call.func) in ("register_buffer", "register_parameter")
                and isinstance(name, ast.Constant)
                and isinstance(name.value, str)
            ):
                if not self._read_before_written(node, f"self.{name.value}", None):
                    self._unproven.add(id(held))
            elif not _reads_only(self.ctx, call):
                self._unproven.add(id(held))

    def _judge_holder(self, statement: ast.stmt, target: ast.expr, value: ast.expr) -> None:
        """``x = torch.Tensor(n)`` (or ``nn.Parameter(...)``, ``.cuda()`` of it): the
        uninitialised memory lives on in ``x``; it is a bug only where ``x`` is read before
        anything writes it."""
        held = _held_call(value)
        if held is not None and self._stored_for_the_caller(target):
            self._unproven.add(id(held))
            return
        if held is None or not isinstance(target, (ast.Name, ast.Attribute)):
            return
        name = target.id if isinstance(target, ast.Name) else None
        if name is not None and _rebound_unread(_following(self.ctx, statement), name):
            self._unproven.add(id(held))  # a dead store: the memory is never read
        elif name is not None and self._only_metadata_read(name, statement):
            self._unproven.add(id(held))  # `xt.device` alone is read: no value is
        elif not self._read_before_written(statement, self.ctx.segment(target), name):
            self._unproven.add(id(held))
        elif name is not None and _handed_to_written_holders(self.ctx, statement, name):
            self._unproven.add(id(held))  # `m.weight = Parameter(w)` then `m.reset_parameters()`
        elif _is_self_attribute(target) and initialised_by_name(self.ctx, target.attr):
            self._unproven.add(id(held))  # `model.apply(init)` filling `m.<attr>` elsewhere
        elif _is_self_attribute(target) and filled_by_a_model_loop(
            self.ctx, target.attr, _dimensions(held)
        ):
            self._unproven.add(id(held))  # `for n, p in model.named_parameters(): init(p)`
        elif (
            _is_self_attribute(target)
            and self._bases_read()
            and not read_by_name(self.ctx, target.attr)
        ):
            self._unproven.add(id(held))  # no line of the program reads `<obj>.<attr>`
        elif _is_self_attribute(target) and target.attr == "example_input_array":
            # Lightning's sample input: traced for the model summary, its values unused
            self._unproven.add(id(held))

    def _stored_for_the_caller(self, target: ast.expr) -> bool:
        """``state_dict[f"{name}._float_tensor"] = torch.FloatTensor(1)``: an entry of a
        dict the caller handed in (fairseq's ``upgrade_state_dict_named``) that the
        function itself never reads. The memory goes back to the caller, which may fill it
        or, as here, only load it into a buffer read for its dtype and device."""
        function = self.ctx.function
        if function is None or not isinstance(target, ast.Subscript):
            return False
        container = target.value
        while isinstance(container, ast.Subscript):
            container = container.value
        if not isinstance(container, ast.Name):
            return False
        if container.id not in function.parameter_names:
            return False
        entry = self.ctx.segment(target)
        return not any(
            isinstance(node, ast.Subscript)
            and isinstance(node.ctx, ast.Load)
            and self.ctx.segment(node) == entry
            for node in ast.walk(function.node)
        )

    def _only_metadata_read(self, name: str, statement: ast.stmt) -> bool:
        """Every read of the local ``name`` after ``statement`` and before the name is
        bound again asks only for what the tensor is, not what it holds (``xt.device``,
        ``xt.shape``, ``xt.size()``): Amphion's MaskGCT allocates ``torch.LongTensor(bsz,
        seq_len)`` only to take its device, and later binds ``xt`` to its result."""
        function = self.ctx.function
        if function is None:
            return False
        nodes = list(ast.walk(function.node))
        parents = {id(child): node for node in nodes for child in ast.iter_child_nodes(node)}
        start = statement.end_lineno or statement.lineno
        named = [n for n in nodes if isinstance(n, ast.Name) and n.id == name]
        end = min(
            (n.lineno for n in named if isinstance(n.ctx, ast.Store) and n.lineno > start),
            default=len(self.ctx.source.splitlines()) + 1,
        )
        reads = [n for n in named if isinstance(n.ctx, ast.Load) and start < n.lineno < end]
        return bool(reads) and all(
            isinstance(parent := parents.get(id(node)), ast.Attribute) and parent.attr in _METADATA
            for node in reads
        )

    def _bases_read(self) -> bool:
        """Whether every base of the class being walked is torch's or the file's: a base
        from elsewhere (mmdet's ``DeformableDetrTransformer``) may read any attribute in a
        method lint does not see."""
        function = self.ctx.function
        owner = function.owner if function is not None else None
        return owner is not None and not any(
            _unread_base(self.ctx, base) for base in owner.node.bases
        )

    def _read_before_written(self, statement: ast.stmt, target: str, name: str | None) -> bool:
        """Whether nothing in the scope that holds ``target`` may write it (a method of
        the class for ``self.x``, the function for a local) and, for a local, something
        reads it."""
        ctx = self.ctx
        function = ctx.function
        if target.startswith("self."):
            if function is None or function.owner is None:
                return True
            scope: ast.AST = function.owner.node
            if _an_owner_fills_all_parameters(ctx, function.owner.node.name):
                return False
            if _unread_base_initialises(ctx, function.owner.node):
                return False
        elif name is not None:
            scope = function.node if function is not None else ctx.tree
        else:
            return True
        read = name is None or function is None
        for node in ast.walk(scope):
            if node is statement:
                continue
            if isinstance(node, ast.Name):
                if node.id == name and isinstance(node.ctx, ast.Load):
                    read = True
                elif node.id == name and isinstance(node.ctx, ast.Del) and function is None:
                    read = False  # a module-level name deleted: allocated only to be dropped
            elif _may_write_node(ctx, node, target) or (
                name is None and _rebinds(ctx, node, target)
            ):
                return False
        return read

    def _initialised_later(self, statement: ast.stmt, target: ast.expr, value: ast.expr) -> None:
        """``w = nn.Parameter(torch.Tensor(n, m))`` followed, in the same block, by
        ``nn.init.xavier_normal_(w)`` (or ``w.data.uniform_()``, or a method of the class
        that does so): the memory is initialised before anyone reads it."""
        if (
            not isinstance(target, (ast.Name, ast.Attribute, ast.Subscript))
            or not self.ctx.may_contain(value, "Tensor")
            or "Tensor" not in self.ctx.segment(value)
        ):
            return  # `cache[size] = torch.Tensor(size)` then `cache[size].uniform_()` counts
        calls = list(_calls_in(value))
        if not calls:
            return
        # Only the ids of calls visit_call may report as legacy constructors are ever
        # looked up in ``_filled``; without one, the statements after need no reading,
        # unless an import further down could change what reading them now caches (the
        # names resolved here are remembered per node).
        calls = [n for n in calls if self._may_be_legacy(n)]
        if not calls and self.ctx.imports_final_at(statement):
            return
        text = self.ctx.segment(target)
        later = _following(self.ctx, statement)[:12]
        # `param = nn.Parameter(weight)` shares the memory: filling `param` fills `weight`
        names = {text} | _keeping_aliases(self.ctx, later, text)
        if any(_initialises(self.ctx, s, name, 0) for s in later for name in names):
            self._filled.update(id(c) for c in calls)

    def _may_be_legacy(self, call: ast.Call) -> bool:
        """Whether :meth:`visit_call` can run on ``call`` and take it for a legacy
        constructor (a superset: an attribute of a legacy name, or any plain name the
        call dispatch can reach, directly or through an import)."""
        func = call.func
        if func.__class__ is ast.Attribute:
            return func.attr in _LEGACY
        if func.__class__ is ast.Name:
            name = func.id
            return name in self.call_names or name in self.ctx.imports
        return False

    def _fills_its_argument(self, call: ast.Call) -> bool:
        """``nn.init.kaiming_normal_(x)``: a ``torch.nn.init`` function, which writes every
        element of its first argument in place."""
        return (
            last_name(call.func) in _INIT_FUNCTIONS
            and bool(call.args)
            and _initialiser(self.ctx, call)
        )

    def visit_call(self, node: ast.Call) -> None:
        ctx = self.ctx
        func = node.func
        if self._fills_its_argument(node):
            # `kaiming_normal_(torch.Tensor(no, ni, k, k))`: filled where it is made
            held = _held_call(node.args[0])
            if held is not None:
                self._filled.add(id(held))
            return
        if isinstance(func, ast.Attribute) and func.attr in _FILLS:
            self._filled.add(id(func.value))  # visited before the call it fills
            held = _held_call(func.value)  # nn.Parameter(torch.Tensor(n)).fill_(1 / n)
            if held is not None:
                self._filled.add(id(held))
            return
        qualified = ctx.qualified_name(func)
        if qualified is None:
            return
        prefix, _, name = qualified.rpartition(".")
        if (
            name not in _LEGACY
            or prefix not in ("torch", "torch.cuda")
            or (prefix == "torch.cuda" and name == "Tensor")
        ):
            return
        cuda = prefix == "torch.cuda"
        kind = _argument_kind(ctx, node)
        dtype = _LEGACY[name]
        filled = id(node) in self._filled
        unproven = id(node) in self._unproven
        # Uninitialised memory someone may read is the bug; a copy of data or a shape filled
        # at once is only a legacy spelling, on the CPU or in torch.cuda (which fails
        # without CUDA as any cuda tensor does).
        zero_sized = kind == _SHAPE and _zero_sized(node)
        risky = kind == _SHAPE and not filled and not unproven and not zero_sized
        severity = Severity.WARNING if risky else Severity.INFO
        message = self._message(node, kind, cuda, filled)
        if zero_sized:
            message += (
                "; a dimension of size 0 leaves no element to read: only the spelling is legacy"
            )
        elif unproven and not filled and kind == _SHAPE:
            message += (
                "; nothing here shows it read before it is written (it is filled by the "
                "code that holds it, handed to a call that may fill it, or never read)"
            )
        self.report(
            node,
            message,
            severity=severity,
            fix_hint=_legacy_hint(kind, dtype, cuda),
            fix=self._fix(node, kind, dtype, cuda),
        )

    def _message(self, node: ast.Call, kind: str, cuda: bool, filled: bool) -> str:
        spelled = self.ctx.segment(node.func)
        if kind in (_SHAPE, _EMPTY):
            what = (
                "an empty tensor"
                if kind == _EMPTY
                else "a tensor of uninitialised memory (whatever the allocator returns)"
            )
            message = (
                f"`{spelled}(...)` at line {node.lineno} reads its arguments as a shape "
                f"and returns {what}"
            )
            if filled and kind == _SHAPE:
                message += ", filled right away here: only the spelling is legacy"
        else:
            message = (
                f"`{spelled}(...)` at line {node.lineno} is a legacy constructor: "
                "integers make it allocate uninitialised memory of that shape, a "
                "sequence makes it copy data, so one typo changes the meaning"
            )
        if cuda:
            message += "; the `torch.cuda` class also fails on machines without CUDA"
        return message

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
        return Fix(
            f"Use `{torch}.{factory}(...)`",
            tuple(edits),
            Applicability.SAFE if safe else Applicability.UNSAFE,
        )


# Calls that make a value out of their arguments without writing them (a module's forward,
# torch functions, builtins). Any other callee may fill a tensor handed to it.
_BUILTIN_READERS = frozenset({"print", "len", "isinstance", "id", "repr", "str", "float", "int"})
# What a tensor is, not what it holds: reading only these reads no element.
_METADATA = frozenset({"device", "dtype", "shape", "size", "dim", "ndim", "is_cuda"})
# Wrappers that keep the same uninitialised memory (or a copy of it) in what they return.
_KEEPERS = frozenset({"Parameter", "Variable"})
# Containers that hold parameters under the module's attribute, filled as a whole.
_CONTAINERS = frozenset({"ParameterDict", "ParameterList"})
_COPIERS = frozenset(
    {"cuda", "to", "float", "double", "half", "long", "int", "type", "contiguous", "pin_memory"}
)
# Views of a tensor: a fill through them writes the tensor itself.
_VIEWS = frozenset(
    {
        "narrow",
        "select",
        "view",
        "view_as",
        "reshape",
        "t",
        "transpose",
        "permute",
        "squeeze",
        "unsqueeze",
        "flatten",
        "chunk",
        "split",
        "unbind",
        "__getitem__",
    }
)
_WRITERS = _FILLS | {"index_copy_", "index_fill_", "scatter_", "masked_scatter_", "set_"}


def _dimensions(call: ast.Call) -> int | None:
    """How many dimensions ``torch.Tensor(h, d)`` (or ``(h, d)`` as one tuple) makes;
    ``None`` when its arguments do not say (``torch.Tensor(size)``, ``*shape``)."""
    args = call.args
    if len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List)):
        args = args[0].elts
    if not args or call.keywords or any(isinstance(a, ast.Starred) for a in args):
        return None
    if len(args) == 1 and not isinstance(args[0], ast.Constant):
        return None  # one name may be a size, a list or a tensor of data
    return len(args)


def _held_call(value: ast.expr) -> ast.Call | None:
    """The legacy-looking call whose memory ``value`` is (``nn.Parameter(torch.Tensor(n))``,
    ``torch.LongTensor(2).cuda()``, also the built branch of ``... if bias else None``), or
    ``None`` when ``value`` computes something else."""
    if isinstance(value, ast.IfExp):
        branches = [b for b in (value.body, value.orelse) if not is_none(b)]
        value = branches[0] if len(branches) == 1 else value
    while value.__class__ is ast.Call:
        assert isinstance(value, ast.Call)
        func = value.func
        if isinstance(func, ast.Attribute) and func.attr in _LEGACY:
            return value
        if isinstance(func, ast.Name) and func.id in _LEGACY:
            return value
        kept = _kept(value)
        if kept is not None:
            value = kept
        elif isinstance(func, ast.Attribute) and func.attr in _COPIERS:
            value = func.value
        elif last_name(func) in _CONTAINERS and value.args:
            value = _element(value.args[0])  # ParameterDict({k: Parameter(...) for k in ...})
        else:
            return None
    return None


def _kept(call: ast.Call) -> ast.expr | None:
    """The tensor ``nn.Parameter(...)`` (or ``Variable``) wraps, given by position or as
    ``data=`` (``nn.Parameter(data=torch.Tensor(1), requires_grad=True)``)."""
    if last_name(call.func) not in _KEEPERS:
        return None
    if call.args:
        return call.args[0]
    return next((k.value for k in call.keywords if k.arg == "data"), None)


def _held_name(value: ast.expr) -> str | None:
    """The local name whose memory ``value`` is (``nn.Parameter(w)``, ``w.cuda()``, ``w``)."""
    while isinstance(value, ast.Call):
        func = value.func
        kept = _kept(value)
        if kept is not None:
            value = kept
        elif isinstance(func, ast.Attribute) and func.attr in _COPIERS:
            value = func.value
        else:
            return None
    return value.id if isinstance(value, ast.Name) else None


def _handed_to_written_holders(ctx: FileContext, statement: ast.stmt, name: str) -> bool:
    """Whether every read of the local ``name`` after ``statement`` hands its memory to
    another holder (``module.weight = nn.Parameter(name)``) that something later in the
    function may write: ``module.reset_parameters()``, an ``nn.init`` function, a fill.
    The memory moved; it is judged where it went."""
    function = ctx.function
    if function is None:
        return False
    holders: list[tuple[ast.Assign, str]] = []
    handed: set[int] = set()
    reads = 0
    # Outside a loop, a read above the allocation reads an earlier value of the name.
    looped = any(isinstance(frame.node, (ast.For, ast.While)) for frame in ctx.frames)
    after = 0 if looped else (statement.end_lineno or statement.lineno)
    for node in ast.walk(function.node):
        if (
            isinstance(node, ast.Name)
            and node.id == name
            and isinstance(node.ctx, ast.Load)
            and node.lineno > after
        ):
            reads += 1
        elif (
            isinstance(node, ast.Assign)
            and node is not statement
            and node.lineno > after  # a holder of an earlier value (another branch)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Attribute)
            and _held_name(node.value) == name
        ):
            holders.append((node, ctx.segment(node.targets[0])))
            handed.update(
                id(n) for n in ast.walk(node.value) if isinstance(n, ast.Name) and n.id == name
            )
    if not holders or reads != len(handed):
        return False
    return all(
        any(
            getattr(node, "lineno", 0) > assign.lineno
            and (_may_write_node(ctx, node, holder) or _resets_owner_of(ctx, node, holder))
            for node in ast.walk(function.node)
        )
        for assign, holder in holders
    )


def _resets_owner_of(ctx: FileContext, node: ast.AST, holder: str) -> bool:
    """``module.reset_parameters()`` for the holder ``module.weight``: torch's layers
    re-initialise every parameter they hold there."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "reset_parameters"
        and holder.startswith(ctx.segment(node.func.value) + ".")
    )


# torch's recurrent layers, whose reset_parameters() draws every parameter the module holds
# (`for weight in self.parameters(): init.uniform_(weight, -stdv, stdv)`), a subclass's own
_RESET_FILLS_ALL = frozenset(
    {"RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"}
)


def _inherited_reset_fills_all(ctx: FileContext, call: ast.Call) -> bool:
    """``self.reset_parameters()`` (or ``super().reset_parameters()``) in a subclass of a
    torch recurrent layer that does not define its own: the inherited reset draws every
    parameter of the module, the ones the subclass adds included (PyPOTS' peephole
    ``LSTMCell`` adds ``weight_ch`` and then resets)."""
    func = call.func
    if not (isinstance(func, ast.Attribute) and func.attr == "reset_parameters"):
        return False
    function = ctx.function
    owner = function.owner if function is not None else None
    if owner is None or function is None:
        return False
    receiver = func.value
    via_super = (
        isinstance(receiver, ast.Call)
        and isinstance(receiver.func, ast.Name)
        and receiver.func.id == "super"
    )
    own = isinstance(receiver, ast.Name) and receiver.id == function.self_name
    # the class node, not the methods walked so far: its own reset may come further down
    overridden = any(
        isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) and m.name == "reset_parameters"
        for m in owner.node.body
    )
    if not via_super and not (own and not overridden):
        return False
    qualified = [ctx.qualified_name(base) or "" for base in owner.node.bases]
    return any(
        name.startswith("torch.") and name.rpartition(".")[2] in _RESET_FILLS_ALL
        for name in qualified
    )


def _element(container: ast.expr) -> ast.expr:
    """The one element expression of a comprehension or a one-element display."""
    if isinstance(container, ast.DictComp):
        return container.value
    if isinstance(container, (ast.ListComp, ast.GeneratorExp)):
        return container.elt
    if isinstance(container, ast.Dict) and len(container.values) == 1:
        return container.values[0]
    if isinstance(container, ast.List) and len(container.elts) == 1:
        return container.elts[0]
    return container


def _base_of(expr: ast.expr) -> ast.expr:
    """The tensor a view or ``.data`` of it belongs to: ``x.narrow(0, 1, n)[i].data`` -> ``x``."""
    while True:
        if isinstance(expr, ast.Subscript) or (
            isinstance(expr, ast.Attribute) and expr.attr == "data"
        ):
            expr = expr.value
        elif (
            isinstance(expr, ast.Call)
            and isinstance(expr.func, ast.Attribute)
            and expr.func.attr in _VIEWS
        ):
            expr = expr.func.value
        else:
            return expr


def _reads_only(ctx: FileContext, call: ast.Call) -> bool:
    """A call known to read its arguments without writing them: a torch function (other
    than ``torch.distributed``, ``nn.init`` and in-place ones) with no ``out=``, or a
    builtin that formats or measures."""
    func = call.func
    if isinstance(func, ast.Name) and func.id in _BUILTIN_READERS:
        return True
    qualified = ctx.qualified_name(func)
    return (
        qualified is not None
        and qualified.startswith("torch.")
        and not qualified.startswith(("torch.distributed.", "torch.nn.init."))
        and not qualified.endswith("_")
        and all(k.arg != "out" for k in call.keywords)
    )


def _may_write(ctx: FileContext, call: ast.Call, target: str) -> bool:
    """Whether ``call`` may write ``target``: a fill method on it or a view of it, or
    ``target`` handed to a callee not known to only read (``nn.init.*``, a helper,
    ``dist.broadcast``)."""
    func = call.func
    if (
        isinstance(func, ast.Attribute)
        and func.attr in _WRITERS
        and ctx.segment(_base_of(func.value)) == target
    ):
        return True
    arguments = [*call.args, *(k.value for k in call.keywords)]
    if not any(ctx.segment(_base_of(a)) == target for a in arguments):
        if any(
            target.startswith(ctx.segment(a) + ".") and _helper_fills_all_parameters(ctx, call, a)
            for a in arguments
        ):
            return True  # `weights_init(self)`, whose loop initialises every parameter
        # `xavier_uniform_(self.w if fused else self.proj.weight)`: an initialiser
        # writes whichever branch it is given (a helper's use of one is not read here)
        return (
            bool(call.args)
            and _initialiser(ctx, call)
            and any(ctx.segment(b) == target for b in _branches(call.args[0]))
        )
    return not _reads_only(ctx, call)


def _helper_fills_all_parameters(ctx: FileContext, call: ast.Call, owner: ast.expr) -> bool:
    """``call`` is a module-level function of this file that loops over every parameter of
    the module it is given as ``owner`` and hands each one on (``for name, p in
    m.named_parameters(): _param_init(p)``, DeepRobust's ``weights_init(self)``): each of
    the module's own parameters is written there, whatever the helper's name. Found in
    the tree, so a helper defined below the class counts too."""
    if not isinstance(call.func, ast.Name) or owner not in call.args:
        return False
    local = {
        node.name: node
        for node in ctx.tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    helper = local.get(call.func.id)
    positional = helper.args.posonlyargs + helper.args.args if helper is not None else []
    index = call.args.index(owner)
    if helper is None or index >= len(positional):
        return False
    parameter = positional[index].arg
    for loop in ast.walk(helper):
        if not _loops_over_parameters_of(loop, parameter):
            continue
        element = loop.target.elts[-1] if isinstance(loop.target, ast.Tuple) else loop.target
        if not isinstance(element, ast.Name):
            continue
        if any(
            isinstance(node, ast.Call)
            and any(isinstance(a, ast.Name) and a.id == element.id for a in node.args)
            and _may_initialise(ctx, node, local)
            for node in ast.walk(loop)
        ):
            return True
    return False


def _may_initialise(ctx: FileContext, call: ast.Call, local: Container[str]) -> bool:
    """A call that may fill the tensor it is given: a function of this file, a
    ``torch.nn.init`` initialiser, or an in-place method (``..._``); not ``print(p)``."""
    name = last_name(call.func) or ""
    return (
        (isinstance(call.func, ast.Name) and name in local)
        or _initialiser(ctx, call)
        or name.endswith("_")
    )


def _may_write_node(ctx: FileContext, node: ast.AST, target: str) -> bool:
    """A call, assignment or loop that may write ``target`` (see the three helpers)."""
    if isinstance(node, ast.Call):
        return _may_write(ctx, node, target)
    if isinstance(node, ast.Assign):
        return _replaces_data(ctx, node, target)
    if isinstance(node, ast.For) and _loop_writes(ctx, node, target):
        return True
    if isinstance(node, (ast.For, ast.While)):
        return _fills_by_index(ctx, node, target)
    return False


# self.<method>() loops that yield each parameter of the module (the loop variable is one).
_PARAMETER_LOOPS = frozenset({"parameters", "named_parameters"})
# Views of a ParameterDict/ParameterList that yield its elements.
_CONTAINER_VIEWS = frozenset({"values", "items", "parameters"})


def _an_owner_fills_all_parameters(ctx: FileContext, class_name: str) -> bool:
    """Whether a class of the file builds a ``class_name`` and after that writes every one
    of its own parameters (``for w in self.parameters(): w.data.uniform_(-std, std)``):
    that loop reaches the built module's parameters too (SR-GNN's GNN cell, built in a
    ``_define_params()`` that ``__init__`` calls before the loop, or in ``__init__``
    before it calls the method that holds the loop)."""
    classes, calls = _classes_and_calls(ctx)
    # the class, and the classes of the file that build it through others (LibCity's
    # ASTGCN builds blocks that build the attention layers its loop then fills)
    built = {class_name}
    grown = True
    while grown:
        grown = False
        for name, cls in classes.items():
            if name not in built and calls[id(cls)] & built:
                built.add(name)
                grown = True
    for owner in classes.values():
        if owner.name == class_name:
            continue
        wanted = built - {owner.name}
        methods = {
            m.name: m for m in owner.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))
        }
        builders = {name for name, m in methods.items() if calls[id(m)] & wanted}
        for method in methods.values():
            for loop in ast.walk(method):
                if not _fills_own_parameters(ctx, loop):
                    continue
                if _built_before(method, loop, wanted, builders):
                    return True
                # `__init__` builds the cell, then calls `self._reset_parameters()`,
                # the method holding the loop (RecBole's SR-GNN)
                if any(
                    _built_before(caller, call, wanted, builders)
                    for caller in methods.values()
                    for call in ast.walk(caller)
                    if isinstance(call, ast.Call) and _calls_own_method(call, method.name)
                ):
                    return True
    return False


def _unread_base_initialises(ctx: FileContext, cls: ast.ClassDef) -> bool:
    """The class calls an initialiser of a base lint cannot read
    (``super().init_weights()``, ``super(Cls, self).reset_parameters()``), a base
    neither of this file nor torch's: that method may fill any of the class's
    parameters (mmdet's DeformableDetrTransformer draws ``level_embeds``)."""
    if not any(_unread_base(ctx, base) for base in cls.bases):
        return False
    for node in ast.walk(cls):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Call)
            and isinstance(node.func.value.func, ast.Name)
            and node.func.value.func.id == "super"
            and node.func.attr != "__init__"
            and ("init" in node.func.attr or "reset" in node.func.attr)
        ):
            return True
    return False


def _unread_base(ctx: FileContext, base: ast.expr) -> bool:
    if isinstance(base, ast.Name) and (base.id == "object" or ctx.local_class(base.id)):
        return False
    qualified = ctx.qualified_name(base)
    return qualified is None or qualified.partition(".")[0] != "torch"


def _calls_own_method(call: ast.Call, name: str) -> bool:
    """``self.<name>(...)``."""
    func = call.func
    return (
        isinstance(func, ast.Attribute)
        and func.attr == name
        and isinstance(func.value, ast.Name)
        and func.value.id == "self"
    )


def _classes_and_calls(
    ctx: FileContext,
) -> tuple[dict[str, ast.ClassDef], dict[int, set[str | None]]]:
    """The file's classes by name, and for each class and method (by node id) the names
    its calls end in (``Block(n)``, ``nn.Linear(...)``): what it may build. Read once per
    file, for every parameter whose owners are asked about."""
    key = ("TD105", "classes-and-calls")
    if key not in ctx.memo:
        classes = {c.name: c for c in ast.walk(ctx.tree) if isinstance(c, ast.ClassDef)}
        calls: dict[int, set[str | None]] = {}
        for cls in classes.values():
            calls[id(cls)] = _call_names(cls)
            for method in cls.body:
                if isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    calls[id(method)] = _call_names(method)
        ctx.memo[key] = (classes, calls)
    return cast("tuple[dict[str, ast.ClassDef], dict[int, set[str | None]]]", ctx.memo[key])


def _call_names(node: ast.AST) -> set[str | None]:
    return {last_name(call.func) for call in ast.walk(node) if isinstance(call, ast.Call)}


def _built_before(
    function: ast.AST, loop: ast.AST, class_names: set[str], builders: set[str]
) -> bool:
    """A call building one of ``class_names``, or of a ``self.<method>()`` that does,
    before ``loop`` in ``function``."""
    line = getattr(loop, "lineno", 0)
    for call in ast.walk(function):
        if not isinstance(call, ast.Call) or call.lineno >= line:
            continue
        if last_name(call.func) in class_names:
            return True
        if any(_calls_own_method(call, builder) for builder in builders):
            return True
    return False


def _fills_own_parameters(ctx: FileContext, loop: ast.AST) -> bool:
    """``for w in self.parameters(): <writes w>``."""
    return _loops_over_parameters_of(loop, "self") and _writes_its_variable(ctx, loop)


def _loops_over_parameters_of(loop: ast.AST, owner: str) -> TypeGuard[ast.For]:
    """``for p in <owner>.parameters():`` (or ``named_parameters()``)."""
    return (
        isinstance(loop, ast.For)
        and isinstance(loop.iter, ast.Call)
        and isinstance(loop.iter.func, ast.Attribute)
        and loop.iter.func.attr in _PARAMETER_LOOPS
        and isinstance(loop.iter.func.value, ast.Name)
        and loop.iter.func.value.id == owner
    )


def _loop_writes(ctx: FileContext, loop: ast.For, target: str) -> bool:
    """``for t in [self.w, self.b]: nn.init.zeros_(t)`` (a literal list, a name bound to
    one in the loop's function, or ``self.parameters()``): the loop variable is
    ``target`` in one pass, so what may write the variable (or a row of it) may write
    ``target``."""
    return _iterates_over(ctx, loop, target) and _writes_its_variable(ctx, loop)


def _writes_its_variable(ctx: FileContext, loop: ast.For) -> bool:
    """Whether the loop's body may write what its variable holds (or a row of it)."""
    variables = {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)}
    return any(
        _may_write_node(ctx, node, variable)
        for node in ast.walk(loop)
        if node is not loop
        for variable in variables
    )


def _iterates_over(ctx: FileContext, loop: ast.For, target: str) -> bool:
    """Whether one of the values ``loop`` binds is ``target``."""
    iterable = loop.iter
    if (
        isinstance(iterable, ast.Call)
        and isinstance(iterable.func, ast.Attribute)
        and iterable.func.attr in _PARAMETER_LOOPS
        and isinstance(iterable.func.value, ast.Name)
        and iterable.func.value.id == "self"
    ):
        return target.startswith("self.")
    if (
        isinstance(iterable, ast.Call)
        and isinstance(iterable.func, ast.Attribute)
        and iterable.func.attr in _CONTAINER_VIEWS
    ):
        iterable = iterable.func.value  # `self.embs.values()`: each element of the dict
    if ctx.segment(iterable) == target:
        return True  # `for emb in self.embs:` over a ParameterList (or the dict's values)
    if isinstance(iterable, ast.Name) or _is_self_attribute(iterable):
        # a name, or an attribute of `self` (SpeechUT's `self.label_embs_list =
        # [self.label_embs_concat]`), bound once to a literal list
        function = ctx.function
        scope: ast.AST = ctx.tree
        if function is not None:
            scope = function.owner.node if function.owner is not None else function.node
        text = ctx.segment(iterable)
        bound = [
            n.value
            for n in ast.walk(scope)
            if isinstance(n, ast.Assign)
            and any(
                isinstance(t, (ast.Name, ast.Attribute)) and ctx.segment(t) == text
                for t in n.targets
            )
        ]
        if len(bound) != 1:
            return False
        iterable = bound[0]
    return isinstance(iterable, (ast.List, ast.Tuple)) and any(
        ctx.segment(e) == target for e in iterable.elts
    )


def _replaces_data(ctx: FileContext, node: ast.Assign, target: str) -> bool:
    """``target.data = ...`` or ``target[...] = ...`` over a whole slice (``x[:] =``)."""
    for written in node.targets:
        if (
            isinstance(written, ast.Attribute)
            and written.attr == "data"
            and ctx.segment(written.value) == target
        ):
            return True
        if (
            isinstance(written, ast.Subscript)
            and isinstance(written.slice, ast.Slice)
            and written.slice.lower is None
            and written.slice.upper is None
            and ctx.segment(written.value) == target
        ):
            return True
    return False


def _rebinds(ctx: FileContext, node: ast.AST, target: str) -> bool:
    """``self.embedding = ...`` in another method: the attribute (a buffer registered with
    the memory) is replaced by a new tensor, as a fill would write it."""
    return isinstance(node, ast.Assign) and any(
        isinstance(t, ast.Attribute) and ctx.segment(t) == target for t in node.targets
    )


def _keeping_aliases(ctx: FileContext, statements: list[ast.stmt], text: str) -> set[str]:
    """Names later bound to a keeper of ``text`` (``param = nn.Parameter(weight)``), which
    holds the same memory: an initialiser given the alias fills the original."""
    found: set[str] = set()
    for statement in statements:
        if (
            isinstance(statement, ast.Assign)
            and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name)
            and isinstance(statement.value, ast.Call)
            and last_name(statement.value.func) in _KEEPERS
            and statement.value.args
            and ctx.segment(statement.value.args[0]) == text
        ):
            found.add(statement.targets[0].id)
    return found


def _is_self_attribute(target: ast.expr) -> TypeGuard[ast.Attribute]:
    return (
        isinstance(target, ast.Attribute)
        and isinstance(target.value, ast.Name)
        and target.value.id == "self"
    )


def _rebound_unread(following: list[ast.stmt], name: str) -> bool:
    """Whether the straight-line statements after an assignment to ``name`` rebind it
    before anything reads it (``x = torch.Tensor(n)`` then ``x = fill(...)``)."""
    for statement in following:
        if not isinstance(statement, (ast.Assign, ast.AnnAssign, ast.Expr)):
            return False  # a branch, loop or return: not followed
        if any(
            isinstance(node, ast.Name) and node.id == name and not isinstance(node.ctx, ast.Store)
            for node in ast.walk(statement)
        ):
            return False
        targets = (
            statement.targets
            if isinstance(statement, ast.Assign)
            else (
                [statement.target]
                if isinstance(statement, ast.AnnAssign) and statement.value
                else []
            )
        )
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return True
    return False


def _following(ctx: FileContext, statement: ast.stmt) -> list[ast.stmt]:
    """The statements after ``statement`` in its own block."""
    owner = ctx.frames[-1].node if ctx.frames else ctx.tree
    for field in ("body", "orelse", "finalbody", "handlers"):
        block = getattr(owner, field, None)
        if isinstance(block, list):
            for index, child in enumerate(block):
                if child is statement:
                    return block[index + 1 :]
    return []


def _initialises(ctx: FileContext, statement: ast.stmt, target: str, depth: int) -> bool:
    """Whether ``statement`` writes every element of ``target`` in place: an ``nn.init``
    function or a fill method on it, a method of the class that does so, a loop that
    assigns its elements one by one (``ids[i] = ...``), or ``module.reset_parameters()``
    for ``target`` ``module.weight`` (a layer's own reset; ``self.reset_parameters()`` is
    a method of the class, read as one)."""
    if _fills_by_index(ctx, statement, target) or _rebound_filled(ctx, statement, target):
        return True
    for node in _calls_in(statement):
        if not target.startswith("self.") and _resets_owner_of(ctx, node, target):
            return True
        if depth == 0 and target.startswith("self.") and _inherited_reset_fills_all(ctx, node):
            return True
        func = node.func
        if (
            node.args
            and _initialiser(ctx, node)
            and any(
                ctx.segment(value).removesuffix(".data") == target
                for value in _branches(node.args[0])
            )
        ):
            return True  # also `xavier_uniform_(self.w if fused else self.proj.weight)`
        if (
            isinstance(func, ast.Attribute)
            and func.attr in _FILLS
            and ctx.segment(func.value).removesuffix(".data") == target
        ):
            return True
        if any(
            target.startswith(ctx.segment(a) + ".") and _helper_fills_all_parameters(ctx, node, a)
            for a in node.args
        ):
            return True  # `weights_init(self)`: a helper that initialises every parameter
        if (
            depth == 0
            and isinstance(func, ast.Attribute)
            and target.startswith("self.")
            and isinstance(func.value, ast.Name)
            and func.value.id == "self"
        ):
            # its own, or inherited from a base of the file (torchdyn's Galerkin layers
            # call the base's `reset_parameters()`, which zero-fills `coeffs`)
            owner = ctx.function.owner if ctx.function is not None else None
            method = ctx.resolve_local_call(node) or (
                local_method(ctx, owner.name, func.attr) if owner is not None else None
            )
            if method is not None and any(
                _initialises(ctx, s, target, 1) for s in method.node.body
            ):
                return True
    return False


def _initialiser(ctx: FileContext, call: ast.Call) -> bool:
    """``nn.init.xavier_uniform_(...)``: an in-place initialiser of ``torch.nn.init``,
    which writes every element of its first argument."""
    qualified = ctx.qualified_name(call.func) or ""
    return qualified.startswith("torch.nn.init.") and qualified.endswith("_")


def _branches(value: ast.expr) -> list[ast.expr]:
    """The values a conditional expression may give (``a if c else b``: ``a`` and ``b``),
    or ``value`` itself."""
    if isinstance(value, ast.IfExp):
        return _branches(value.body) + _branches(value.orelse)
    return [value]


def _rebound_filled(ctx: FileContext, statement: ast.stmt, target: str) -> bool:
    """``lat = lat.to(device).zero_().type(dtype)`` (Tacotron 2): the name is rebound to
    its own copy filled in the chain, so its old memory is never read."""
    if not (
        isinstance(statement, ast.Assign)
        and len(statement.targets) == 1
        and ctx.segment(statement.targets[0]) == target
    ):
        return False
    value: ast.expr = statement.value
    filled = False
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute):
        method = value.func.attr
        if method in _FILLS:
            filled = True
        elif method not in _COPIERS:
            return False
        value = value.func.value
    return filled and ctx.segment(value) == target


# Nodes that never hold a call: names, constants, contexts and operators (most of a tree).
_NO_CALLS = frozenset(
    {ast.Name, ast.Constant, ast.Load, ast.Store, ast.Del}
    | {
        cls
        for base in (ast.operator, ast.unaryop, ast.cmpop, ast.boolop)
        for cls in base.__subclasses__()
    }
)
_FIELDS: dict[type, tuple[str, ...]] = {}


def _fills_by_index(ctx: FileContext, statement: ast.stmt, target: str) -> bool:
    """A loop in ``statement`` (or ``statement`` itself) that assigns ``target[...] =``:
    the usual way to fill a tensor allocated by size, element by element."""
    if target not in ctx.segment(statement):
        return False
    for loop in ast.walk(statement):
        if not isinstance(loop, (ast.For, ast.While)):
            continue
        for node in ast.walk(loop):
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Subscript) and ctx.segment(_indexed(t)) == target
                for t in node.targets
            ):
                return True
    return False


def _indexed(target: ast.Subscript) -> ast.expr:
    """The tensor an element assignment writes: ``x`` of ``x[i]`` and of ``x[0][i]``."""
    value = target.value
    while isinstance(value, ast.Subscript):
        value = value.value
    return value


def _calls_in(node: ast.AST) -> Iterator[ast.Call]:
    """The calls in ``node`` (itself included), in the order of ``ast.walk`` (breadth
    first), without visiting the leaves that cannot hold one: the names resolved for
    them, and so what gets cached, follow the same order."""
    todo = deque([node])
    pop, append, extend, no_calls = todo.popleft, todo.append, todo.extend, _NO_CALLS
    while todo:
        current = pop()
        cls = current.__class__
        fields = _FIELDS.get(cls)
        if fields is None:
            fields = _FIELDS[cls] = getattr(cls, "_fields", ())
        for field in fields:
            value = getattr(current, field, None)
            if value.__class__ is list:
                extend(
                    item
                    for item in value
                    if item.__class__ not in no_calls and isinstance(item, ast.AST)
                )
            elif value.__class__ not in no_calls and isinstance(value, ast.AST):
                append(value)
        if cls is ast.Call:
            yield current  # type: ignore[misc]


def _legacy_hint(kind: str, dtype: str | None, cuda: bool) -> str:
    spelled = "" if dtype is None else f", dtype=torch.{dtype}"
    device = ", device=device" if cuda else ""
    if kind in (_SHAPE, _EMPTY):
        return (
            f"Use `torch.zeros(...{spelled}{device})` if the values matter, or "
            f"`torch.empty(...{spelled}{device})` if every element is written before use."
        )
    if kind == _DATA:
        return f"Use `torch.tensor(data{spelled or ', dtype=torch.float32'}{device})`."
    return (
        f"Say which you mean: `torch.empty(n{spelled}{device})` for a size, "
        f"`torch.as_tensor(data{spelled or ', dtype=torch.float32'}{device})` for data."
    )


def _zero_sized(call: ast.Call) -> bool:
    """``torch.Tensor(batch, 0)``: a literal 0 among the sizes, so the tensor holds nothing
    (it is grown later, by ``torch.cat``)."""
    return any(
        isinstance(a, ast.Constant) and type(a.value) is int and a.value == 0 for a in call.args
    )


def _forwards_varargs(ctx: FileContext, arg: ast.expr) -> bool:
    """``torch.FloatTensor(*args)`` inside ``def helper(*args)``: the helper's callers pass
    a shape or data, and nothing here tells which (``*size`` or ``*shape`` says: a shape)."""
    function = ctx.function
    if function is None or not isinstance(arg, ast.Starred) or not isinstance(arg.value, ast.Name):
        return False
    vararg = function.node.args.vararg
    return (
        vararg is not None
        and vararg.arg == arg.value.id
        and not any(word in vararg.arg.lower() for word in ("size", "shape", "dim"))
    )


def _argument_kind(ctx: FileContext, call: ast.Call) -> str:
    """Whether a legacy call's arguments are a shape, data, nothing, or cannot be told."""
    args = call.args
    if not args:
        return _EMPTY if not any(k.arg is None for k in call.keywords) else _UNKNOWN
    if len(args) == 1 and _forwards_varargs(ctx, args[0]):
        return _UNKNOWN  # a wrapper passing its callers' arguments on: they decide
    if len(args) > 1 or isinstance(args[0], ast.Starred):
        return _SHAPE
    arg = args[0]
    if isinstance(arg, ast.Name):
        found = ctx.binding(arg)
        if (
            found is not None
            and found.kind is BindingKind.ASSIGN
            and isinstance(found.value, (ast.Constant, ast.List, ast.Tuple))
        ):
            arg = found.value
    if isinstance(arg, ast.Constant):
        return (
            _SHAPE if isinstance(arg.value, int) and not isinstance(arg.value, bool) else _UNKNOWN
        )
    if isinstance(arg, (ast.List, ast.Tuple, ast.ListComp)):
        return _DATA
    # ``x.shape`` is a ``torch.Size`` (a shape) for a tensor but a tuple (read as data)
    # for a NumPy array or a gym space: which one cannot be told here.
    if (
        isinstance(arg, ast.Subscript)
        and isinstance(arg.value, ast.Attribute)
        and arg.value.attr == "shape"
    ):
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

_CONSTANT_FACTORIES = torchapi.CONSTANT_FACTORIES
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
            for e in loop_events(self.ctx, loop, forwards=False)
        ):
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
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("to", "cuda")
                and loop.is_direct(item)
            ):
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
        arg = (
            call.args[0]
            if call.args
            else next((k.value for k in call.keywords if k.arg == "device"), None)
        )
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
        name = (
            arg.id
            if isinstance(arg, ast.Name)
            else (arg.attr if isinstance(arg, ast.Attribute) else "")
        )
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
            if (
                found is None
                or found[0].kind is not BindingKind.ASSIGN
                or not isinstance(found[0].value, ast.Call)
            ):
                return None
            value = found[0].value
            if value.lineno >= loop.node.lineno:
                return None
        if not isinstance(value, ast.Call) or not ctx.is_call_to(
            value, *_CONSTANT_FACTORIES, scope=loop.function
        ):
            return None
        for node in ast.walk(value):
            if isinstance(node, ast.Name) and node.id in bound:
                return None
            if (
                isinstance(node, ast.Call)
                and node is not value
                and not (ctx.qualified_name(node.func, loop.function) or "").startswith("torch.")
            ):
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
        cost = (
            "a synchronising host-to-device copy"
            if where
            else "an allocation plus a synchronising host-to-device copy"
        )
        self.report(
            move,
            f"`{moved}`{where} is the same CPU tensor on every iteration of the loop at line "
            f"{loop.line}, yet line {move.lineno} copies it to `{device}` each time: {cost} "
            "per step",
            fix_hint=f"Build it once, on the device, before the loop: `{suggestion}`.",
            evidence={"loop_line": loop.line, "built_line": built.lineno},
        )
