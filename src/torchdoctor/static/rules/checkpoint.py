"""Checkpoint loading rules: TD901 load-without-map-location, TD902 unsafe-checkpoint-load.

TD903 and TD904 (what a checkpoint holds) live in :mod:`.state_dicts`, TD905 (incomplete
resume checkpoints) in :mod:`.resume`, TD906 (never seeded) in :mod:`.reproducibility`.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator
from typing import cast

from torchdoctor.findings import Applicability, Confidence, Depth, Edit, Finding, Fix, Severity
from torchdoctor.rules.detectors import detector
from torchdoctor.static import torchapi
from torchdoctor.static.analysis.calls import keyword, last_name
from torchdoctor.static.analysis.cpu_values import RNG_SETTERS, holds_cpu_data, rng_call
from torchdoctor.static.analysis.ranks import is_rank_zero, names_rank, resolver
from torchdoctor.static.analysis.spawned import runs_once_beside_spawned_workers
from torchdoctor.static.analysis.weight_saves import (
    restores_an_optimizer,
    weights_saved_from_the_cpu,
)
from torchdoctor.static.analysis.whole_loads import full_unpickling_forced
from torchdoctor.static.branches import exclusive
from torchdoctor.static.context import FileContext, Scope
from torchdoctor.static.rules.base import LintRule
from torchdoctor.static.structure import Frame, FrameKind, FunctionScope

_GPU_WORDS = ("cuda", "nccl")
# Names in a program's code that show it runs several processes (with `mp.spawn`).
_PROCESS_WORDS = ("DistributedDataParallel", "init_process_group", "LOCAL_RANK", "local_rank")


def runs_several_processes(ctx: FileContext) -> bool:
    """The file's code shows a multi-process run: a process group, a DDP wrapper, a
    spawn, or a local rank the program reads (``args.local_rank``,
    ``os.environ["LOCAL_RANK"]``). Comments and docstrings show nothing, and neither does
    a ``--local_rank`` flag that is only declared (``parser.add_argument("--local_rank",
    ...)``) and never read, as in scripts that scale with DataParallel in one process."""
    key = ("checkpoint", "several_processes")
    if key not in ctx.memo:
        ctx.memo[key] = any(_shows_processes(node) for node in _code_nodes(ctx.tree))
    return cast("bool", ctx.memo[key])


def _code_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """The nodes of ``tree`` that the program runs, leaving out docstrings and the
    arguments of ``add_argument(...)`` calls (a flag declared is not a flag read)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Call) and last_name(node.func) == "add_argument":
            continue
        yield node
        children = list(ast.iter_child_nodes(node))
        if (
            isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
        ):
            children.remove(node.body[0])  # the docstring
        stack.extend(children)


def _shows_processes(node: ast.AST) -> bool:
    if isinstance(node, ast.Attribute) and node.attr == "spawn":
        return last_name(node.value) in ("mp", "multiprocessing")
    if isinstance(node, ast.alias):
        text = node.name
    elif isinstance(node, ast.Constant) and isinstance(node.value, str):
        text = node.value
    else:
        text = getattr(node, "id", None) or getattr(node, "attr", None) or ""
    return any(word in text for word in _PROCESS_WORDS)


def has_star_kwargs(call: ast.Call) -> bool:
    """``f(**options)``: keyword arguments lint cannot see."""
    return any(k.arg is None for k in call.keywords)


def append_argument(ctx: FileContext, call: ast.Call, text: str) -> Edit | None:
    """An edit that adds ``, text`` right after a call's last argument."""
    last = max(
        [*call.args, *(k.value for k in call.keywords)],
        key=lambda n: (n.end_lineno or 0, n.end_col_offset or 0),
        default=None,
    )
    if last is None or last.end_lineno is None or last.end_col_offset is None:
        return None
    line = last.end_lineno
    column = ctx.column(line, last.end_col_offset)
    return Edit(line, column, line, column, f", {text}")


def loaded_source(call: ast.Call) -> ast.expr | None:
    """What ``torch.load`` reads: its first argument or ``f=``."""
    return call.args[0] if call.args else getattr(keyword(call, "f"), "value", None)


def reads_back_own_save(ctx: FileContext, load: ast.Call, scope: Scope) -> bool:
    """The same function saved to this very file or buffer before loading it: a round
    trip of the program's own data, on the same machine. The save is ``torch.save(obj,
    f)`` or any other saving call given the same path (``fabric.save(path, state)``,
    ``trainer.save_checkpoint(path)``, ``save_model(model, path)``)."""
    source = loaded_source(load)
    if source is None:
        return False
    text = ast.dump(source)  # the path as built, whatever its quotes or spacing
    items = scope.items if scope is not None else ctx.module.items
    for item in items:
        node = item.node
        if not isinstance(node, ast.Call) or item.line > load.lineno or node is load:
            continue
        if ctx.is_call_to(node, "torch.save", scope=scope):
            target = (
                node.args[1] if len(node.args) > 1 else getattr(keyword(node, "f"), "value", None)
            )
            if target is not None and ast.dump(target) == text:
                return True
        elif "save" in last_name(node.func).lower() and any(
            ast.dump(argument) == text
            for argument in [*node.args, *(k.value for k in node.keywords)]
        ):
            return True
    return False


def _in_memory(ctx: FileContext, source: ast.expr, scope: Scope) -> bool:
    """``io.BytesIO(...)``, directly or through a variable."""
    if isinstance(source, ast.Name):
        binding = ctx.binding(source, scope)
        source = binding.value if binding is not None and binding.value is not None else source
    return isinstance(source, ast.Call) and ctx.is_call_to(source, "io.BytesIO", scope=scope)


def _path_text(ctx: FileContext, path: ast.expr, scope: Scope) -> str:
    """A path's source text, read through the name it is held in (``model_path`` bound to
    ``os.path.join(out, f"model_{step}.pt")``), so a save and a load in two functions that
    build the same path compare equal."""
    if isinstance(path, ast.Name):
        binding = ctx.binding(path, scope)
        if binding is not None and binding.value is not None:
            return ctx.segment(binding.value)
    return ctx.segment(path)


# Calls that only assemble a path from its parts: the parts decide which file it is.
_PATH_BUILDERS = frozenset({"join", "format", "Path", "str", "joinpath", "expanduser"})
PathShape = tuple[str, ...]


def _path_shape(ctx: FileContext, path: ast.expr, scope: Scope) -> PathShape | None:
    """What names a file apart from the folder it is in: the text parts of the path, in
    order, and the project helpers that build it (``os.path.join(args.dump, "feat.pth")``
    and ``os.path.join(args.load, "feat.pth")`` both give ``("feat.pth",)``; so do
    ``f"{out}/feat.pth"`` and a format string with those parts). ``None`` when the path
    has no text part of its own (``args.resume``): its parts say nothing of the file."""
    if isinstance(path, ast.Name):
        binding = ctx.binding(path, scope)
        if binding is not None and binding.value is not None:
            path = binding.value
    parts: list[str] = []
    texts = 0
    for node in ast.walk(path):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value:
            parts.append(node.value)
            texts += 1
        elif isinstance(node, ast.Call):
            name = last_name(node.func)
            if name and name not in _PATH_BUILDERS:
                parts.append(f"{name}()")
    return tuple(parts) if texts else None


def _name_pattern(ctx: FileContext, path: ast.expr, scope: Scope) -> re.Pattern[str] | None:
    """The file names a formatted path can give (``f"{prefix}_mean.pt"`` gives any name
    ending in ``_mean.pt``), from its last f-string: each placeholder matches any text.
    ``None`` without an f-string, or when it fixes no more of the name than its extension."""
    if isinstance(path, ast.Name):
        binding = ctx.binding(path, scope)
        if binding is not None and binding.value is not None:
            path = binding.value
    formatted = [node for node in ast.walk(path) if isinstance(node, ast.JoinedStr)]
    if not formatted:
        return None
    pieces: list[str] = []
    for value in reversed(formatted[-1].values):
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            text = value.value.rpartition("/")[2]
            pieces.append(re.escape(text))
            if "/" in value.value:
                break
        else:
            pieces.append(".+")
    name = "".join(reversed(pieces))
    fixed = "".join(p for p in reversed(pieces) if p != ".+").replace("\\", "")
    stem, dot, _ = fixed.rpartition(".")
    # A name fixed beyond its extension (`_mean.pt`, not `{name}.pt`, which any file fits).
    return re.compile(name) if dot and any(c.isalpha() for c in stem) else None


def _cpu_saves(
    ctx: FileContext,
) -> tuple[dict[str, bool], dict[PathShape, bool], dict[re.Pattern[str], bool]]:
    """The paths this file's ``torch.save`` calls write to, each with whether everything
    saved there is on the CPU (a path saved to twice must be on the CPU both times); the
    same by the shape of each path (:func:`_path_shape`); and by the names a formatted
    path can give (:func:`_name_pattern`)."""
    found: dict[str, bool] = {}
    shapes: dict[PathShape, bool] = {}
    names: dict[re.Pattern[str], bool] = {}
    scopes: list[FunctionScope | None] = [None, *ctx.module.functions]
    for scope in scopes:
        for item in scope.items if scope is not None else ctx.module.items:
            node = item.node
            if not (isinstance(node, ast.Call) and ctx.is_call_to(node, "torch.save", scope=scope)):
                continue
            saved = node.args[0] if node.args else getattr(keyword(node, "obj"), "value", None)
            target = (
                node.args[1] if len(node.args) > 1 else getattr(keyword(node, "f"), "value", None)
            )
            if saved is None or target is None:
                continue
            path = _path_text(ctx, target, scope)
            on_cpu = _on_cpu(ctx, saved, scope)
            found[path] = found.get(path, True) and on_cpu
            shape = _path_shape(ctx, target, scope)
            if shape is not None:
                shapes[shape] = shapes.get(shape, True) and on_cpu
            pattern = _name_pattern(ctx, target, scope)
            if pattern is not None:
                names[pattern] = names.get(pattern, True) and on_cpu
    return found, shapes, names


def _written_from_the_cpu(name: str, names: dict[re.Pattern[str], bool]) -> bool:
    """Every formatted save whose names include ``name`` (the last text part of a load's
    path) wrote CPU tensors, and there is at least one."""
    file_name = name.rpartition("/")[2]
    matched = [on_cpu for pattern, on_cpu in names.items() if pattern.fullmatch(file_name)]
    return bool(matched) and all(matched)


# Tensors made from host data, on the CPU unless a device is given.
_HOST_BUILDERS = ("torch.tensor", "torch.from_numpy", "torch.as_tensor")


def _on_cpu(ctx: FileContext, value: ast.expr, scope: Scope) -> bool:
    """Everything in ``value`` is on the CPU (:func:`holds_cpu_data`), names read through
    the file's bindings."""

    def resolve(name: ast.Name) -> ast.expr | None:
        binding = ctx.binding(name, scope)
        return binding.value if binding is not None else None

    def made_on_host(call: ast.Call) -> bool:
        return ctx.is_call_to(call, *_HOST_BUILDERS, scope=scope)

    return holds_cpu_data(value, resolve, made_on_host)


@detector("TD901", depth=Depth.LINT)
class LoadWithoutMapLocation(LintRule):
    """``torch.load(path)`` of a checkpoint with no ``map_location``, in a program that
    uses the GPU."""

    requires = _GPU_WORDS
    call_names = frozenset({"load", "load_state_dict"})

    def __init__(self, ctx: FileContext, sink: Callable[[Finding], None]) -> None:
        super().__init__(ctx, sink)
        self._loads: list[tuple[ast.Call, FunctionScope | None]] = []
        self._frames: dict[int, tuple[Frame, ...]] = {}  # each load's enclosing blocks
        # Arguments of load_state_dict(...) calls -> the receivers that take them.
        self._restored: dict[int, list[tuple[ast.expr, FunctionScope | None]]] = {}
        self._names: dict[int, str] = {}

    def visit_Assign(self, node: ast.Assign) -> None:
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            self._names[id(node.value)] = node.targets[0].id

    def visit_call(self, node: ast.Call) -> None:
        ctx = self.ctx
        if isinstance(node.func, ast.Attribute) and node.func.attr == "load_state_dict":
            for argument in node.args:
                self._restored.setdefault(id(argument), []).append((node.func.value, ctx.function))
            return
        if (
            not ctx.is_call_to(node, "torch.load")
            or len(node.args) > 1
            or keyword(node, "map_location")
            or has_star_kwargs(node)
            or not node.args
        ):
            return
        if not (
            _in_memory(ctx, node.args[0], ctx.function)
            or reads_back_own_save(ctx, node, ctx.function)
        ):
            self._loads.append((node, ctx.function))
            self._frames[id(node)] = ctx.frames

    def leave_module(self, module: object) -> None:
        saves, shapes, names = _cpu_saves(self.ctx) if self._loads else ({}, {}, {})
        for call, scope in self._loads:
            path = _path_text(self.ctx, call.args[0], scope)
            if saves.get(path, False):
                continue  # this program wrote that file itself, from CPU tensors
            shape = _path_shape(self.ctx, call.args[0], scope)
            if shape is not None and shapes.get(shape, False):
                continue  # the same file name, built the same way, written from the CPU
            if shape and _written_from_the_cpu(shape[-1], names):
                continue  # `parameter_mean.pt`, written as f"{prefix}_mean.pt" from the CPU
            if self._reads_weights(call, scope) and weights_saved_from_the_cpu(self.ctx):
                continue  # UNITER: the program's one saver writes `v.cpu()` weights
            if self._holds_a_checkpoint(call, scope):
                self._report(call, self._mapped_on_the_other_branch(call, scope), scope)

    def _reads_weights(self, call: ast.Call, scope: FunctionScope | None) -> bool:
        """The load is bound to a name that restores no optimizer in its function."""
        name = self._names.get(id(call))
        body = scope.node if scope is not None else self.ctx.tree
        return name is not None and not restores_an_optimizer(body, name)

    def _mapped_on_the_other_branch(self, call: ast.Call, scope: FunctionScope | None) -> int:
        """The line of a ``torch.load(..., map_location=...)`` on the other side of an
        ``if`` around ``call`` (``if args.gpu is None: load(p) else: load(p,
        map_location=loc)``), or 0: there the author chose the default deliberately."""
        items = scope.items if scope is not None else self.ctx.module.items
        mine = next((item for item in items if item.node is call), None)
        if mine is None:
            return 0
        for item in items:
            node = item.node
            if (
                isinstance(node, ast.Call)
                and keyword(node, "map_location")
                and self.ctx.is_call_to(node, "torch.load")
                and exclusive(self.ctx, mine, item)
            ):
                return node.lineno
        return 0

    def _holds_a_checkpoint(self, call: ast.Call, scope: FunctionScope | None) -> bool:
        """The load restores a model (its result goes to ``load_state_dict``), or its
        variable or path reads like a checkpoint (``ckpt``, ``"model.pt"``). Not when
        only a ``GradScaler`` or a learning-rate scheduler takes it: their state is plain
        numbers, with no tensor whose device could be wrong."""
        restoring = self._restoring(call, scope)
        if restoring and all(self._holds_numbers(receiver, where) for receiver, where in restoring):
            return False
        if self._restores_rng_states(call, scope):
            return False
        name = self._names.get(id(call))
        if not restoring and _names_settings(call.args[0], name):
            return False  # `torch.load(op.join(ckpt_dir, "training_args.bin"))`: an args object
        if restoring or _names_a_checkpoint(call.args[0]):
            return True
        return name is not None and bool(_CHECKPOINT_WORDS & set(torchapi.name_tokens(name)))

    def _restores_rng_states(self, call: ast.Call, scope: FunctionScope | None) -> bool:
        """The loaded value only feeds random-number-generator setters
        (``torch.set_rng_state(state["cpu"])``, ``random.setstate(state["python"])``):
        generator states are CPU byte tensors and plain data, whatever device the run
        used, so no tensor of the file can land on a GPU."""
        name = self._names.get(id(call))
        if name is None:
            return False
        body: ast.AST = scope.node if scope is not None else self.ctx.tree
        parents = {
            id(child): node for node in ast.walk(body) for child in ast.iter_child_nodes(node)
        }
        uses = 0
        for node in ast.walk(body):
            if not (
                isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Load)
            ):
                continue
            uses += 1
            use: ast.AST = node
            parent = parents.get(id(use))
            if isinstance(parent, ast.Subscript) and parent.value is use:
                use, parent = parent, parents.get(id(parent))
            if not (
                isinstance(parent, ast.Call)
                and use in parent.args
                and rng_call(parent.func, RNG_SETTERS)
            ):
                return False
        return uses > 0

    def _holds_numbers(self, receiver: ast.expr, scope: FunctionScope | None) -> bool:
        """A GradScaler or a learning-rate scheduler by its class, or by its name
        (``self.scaler`` built by a helper whose return the file does not show)."""
        families = (torchapi.GRAD_SCALER, torchapi.SCHEDULER)
        if any(self.ctx.is_in_family(receiver, family, scope) for family in families):
            return True
        name = last_name(receiver)
        return bool(name) and torchapi.hinted_family(name) in families

    def _restoring(
        self, call: ast.Call, scope: FunctionScope | None
    ) -> list[tuple[ast.expr, FunctionScope | None]]:
        """The receivers of the ``load_state_dict`` calls the loaded value goes to:
        directly, or through the name it is assigned to (in the same scope)."""
        found = list(self._restored.get(id(call), ()))
        name = self._names.get(id(call))
        if name is None:
            return found
        items = scope.items if scope is not None else self.ctx.module.items
        # `data = torch.load(opt); optimizer.load_state_dict(data[...]); data =
        # torch.load(sched); scheduler.load_state_dict(data[...])` (monosdf): a name
        # bound again to something else holds that from there on (`weight =
        # weight["ema"]` still holds the load).
        rebound = min(
            (
                item.line
                for item in items
                if item.line > call.lineno
                and isinstance(item.node, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == name for t in item.node.targets)
                and not any(
                    isinstance(n, ast.Name) and n.id == name for n in ast.walk(item.node.value)
                )
            ),
            default=None,
        )
        for item in items:
            node = item.node
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "load_state_dict"
                and call.lineno <= item.line
                and (rebound is None or item.line < rebound)
                and any(
                    isinstance(n, ast.Name) and n.id == name for a in node.args for n in ast.walk(a)
                )
            ):
                found.append((node.func.value, scope))
        return found

    def _rank_zero_only(self, node: ast.Call, scope: FunctionScope | None) -> bool:
        """The load runs under a rank-zero test (``if hvd.rank() == 0:``): one process
        loads, on its own device, and broadcasts; no rank piles onto cuda:0."""
        resolve = resolver(self.ctx, scope)
        return any(
            frame.kind is FrameKind.IF_BODY
            and is_rank_zero(cast("ast.If", frame.node).test, resolve)
            for frame in self._frames.get(id(node), ())
        )

    def _per_rank_file(self, path: ast.expr, scope: FunctionScope | None) -> bool:
        """The path names the process's own rank (``f"checkpoint_gpu_{rank}.pt"``,
        ``os.path.join(out, f"rank{dist.get_rank()}.pt")``): each rank reads the file it
        wrote from its own device, so the tensors go back there, not all onto cuda:0."""
        resolve = resolver(self.ctx, scope)
        if isinstance(path, ast.Name):
            path = resolve(path) or path
        return any(
            isinstance(node, (ast.Name, ast.Attribute, ast.Call)) and names_rank(node, resolve)
            for node in ast.walk(path)
        )

    def _report(self, node: ast.Call, mapped_elsewhere: int, scope: FunctionScope | None) -> None:
        ctx = self.ctx
        edit = append_argument(ctx, node, 'map_location="cpu"')
        fix = (
            Fix('Load onto the CPU: add `map_location="cpu"`', (edit,), Applicability.UNSAFE)
            if edit
            else None
        )
        # Several processes on one machine make the silent failure (every rank's copy on
        # cuda:0) a warning; otherwise the load can only fail loudly on another machine.
        ranks = (
            runs_several_processes(ctx)
            and not self._rank_zero_only(node, scope)
            and not self._per_rank_file(node.args[0], scope)
            and not runs_once_beside_spawned_workers(ctx, scope)
        )
        chosen = (
            f" (the other branch, line {mapped_elsewhere}, passes one: this default looks "
            "chosen, so check it holds on every machine this branch runs on)"
            if mapped_elsewhere
            else ""
        )
        self.report(
            node,
            f"`torch.load({ctx.segment(node.args[0])})` at line {node.lineno} has no "
            "`map_location`: tensors saved from a GPU come back on the device they were "
            "saved from"
            + (
                ", so under DDP every rank loads its copy onto cuda:0 (memory runs out "
                "there, the other GPUs wait), and the load fails on a machine without "
                "that GPU"
                if ranks
                else ', so the load fails on a machine without that GPU ("Attempting to '
                'deserialize object on a CUDA device")'
            )
            + chosen,
            fix_hint='Pass `map_location="cpu"` (then move the model with `.to(device)`), '
            "or `map_location=device` for the process's own device.",
            confidence=Confidence.MEDIUM,
            fix=fix,
            severity=None if ranks and not mapped_elsewhere else Severity.INFO,
        )


_CHECKPOINT_WORDS = frozenset(
    {
        "ckpt",
        "checkpoint",
        "checkpoints",
        "state",
        "weights",
        "model",
        "pretrained",
        "resume",
        "snapshot",
        "sd",
        "params",
        "best",
        "last",
    }
)
_CHECKPOINT_SUFFIXES = (".pt", ".pth", ".ckpt", ".bin", ".tar", ".pkl")


# Picklers made to serialise what plain pickle cannot (lambdas, closures, whole objects).
_RICH_PICKLERS = frozenset({"dill", "cloudpickle"})


def _pickle_module(load: ast.Call) -> ast.expr | None:
    """The ``pickle_module`` a ``torch.load`` passes, by keyword or third positional."""
    given = keyword(load, "pickle_module")
    if given is not None:
        return given.value
    return load.args[2] if len(load.args) > 2 else None


# Words of a file or name that holds a run's settings (`training_args.bin`, `hparams.pt`):
# an argparse Namespace or a dataclass of options, with no tensor to land on a GPU.
_SETTINGS_WORDS = frozenset(
    {"args", "arguments", "hparams", "hyperparameters", "opts", "options", "flags", "settings"}
)


def _names_settings(path: ast.expr, bound: str | None) -> bool:
    """The file the load reads is named for the run's settings (its last text part, as
    Hugging Face's ``training_args.bin`` that Oscar saves with ``torch.save(args, ...)``),
    or its result is bound to such a name (``train_args = torch.load(...)``)."""
    texts = [
        node.value
        for node in ast.walk(path)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    ]
    file_name = texts[-1].rpartition("/")[2] if texts else ""
    return any(
        _SETTINGS_WORDS & set(torchapi.name_tokens(text))
        for text in (file_name.rpartition(".")[0], bound or "")
    )


def _names_a_checkpoint(path: ast.expr) -> bool:
    """A path like ``"model.pt"``, ``args.resume`` or ``checkpoint_path``."""
    for node in ast.walk(path):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and (
                node.value.endswith(_CHECKPOINT_SUFFIXES)
                or _CHECKPOINT_WORDS & set(torchapi.name_tokens(node.value))
            )
        ):
            return True
        name = (
            node.id
            if isinstance(node, ast.Name)
            else (node.attr if isinstance(node, ast.Attribute) else None)
        )
        if name is not None and _CHECKPOINT_WORDS & set(torchapi.name_tokens(name)):
            return True
    return False


@detector("TD902", depth=Depth.LINT)
class UnsafeCheckpointLoad(LintRule):
    """``torch.load`` that unpickles arbitrary objects: ``weights_only=False``, a custom
    ``pickle_module``, or (on torch older than 2.6) the default."""

    requires = ("load",)
    call_names = frozenset({"load"})
    needs_structure = True

    def visit_call(self, node: ast.Call) -> None:
        ctx = self.ctx
        if (
            not ctx.is_call_to(node, "torch.load")
            or has_star_kwargs(node)
            or reads_back_own_save(ctx, node, ctx.function)
        ):
            return
        weights_only = keyword(node, "weights_only")
        if weights_only is not None:
            value = weights_only.value
            if isinstance(value, ast.Constant) and value.value is False:
                self._explicit(node, value)
            return
        given = _pickle_module(node)
        if given is not None and last_name(given) in _RICH_PICKLERS:
            # dill/cloudpickle exist to unpickle objects plain pickle cannot: full
            # unpickling is the point, a decision like `weights_only=False` written out.
            self._unsafe_default(
                node,
                f"passes `pickle_module={self.ctx.segment(given)}` to unpickle whole objects "
                "on purpose, which turns `weights_only` off on every torch version",
                Severity.INFO,
                Confidence.HIGH,
            )
        elif given is not None:
            self._unsafe_default(
                node,
                "passes a `pickle_module`, which makes "
                "`weights_only` default to False on every torch version",
                Severity.ERROR,
                Confidence.HIGH,
            )
        elif (forced := full_unpickling_forced(ctx)) is not None:
            # Set in the source, the variable is a decision like `weights_only=False`
            # written out: information stating the risk, not an error about a mistake.
            self._unsafe_default(
                node,
                f"relies on the `weights_only` default, which {forced} turns off on "
                "purpose with TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD for the whole process",
                Severity.INFO,
                Confidence.HIGH,
            )
        else:
            self._unsafe_default(
                node,
                "relies on the `weights_only` default: safe from torch "
                "2.6 (True), full unpickling before 2.6",
                Severity.INFO,
                Confidence.MEDIUM,
            )

    def _explicit(self, call: ast.Call, value: ast.expr) -> None:
        # Written out, False is a decision the author took (often for a file the program
        # wrote itself): information stating the risk, not an error about a mistake.
        fix = Fix(
            "Load with `weights_only=True`",
            (self.ctx.replace(value, "True"),),
            Applicability.UNSAFE,
        )
        self.report(
            call,
            f"`torch.load(...)` at line {call.lineno} passes `weights_only=False` on "
            "purpose: the file is unpickled without restriction, so loading a checkpoint "
            "that anyone else could have written or altered runs whatever code it carries",
            fix_hint="Keep `weights_only=False` only for files this program wrote itself; "
            "otherwise load with `weights_only=True` and allow your own classes "
            "with `torch.serialization.add_safe_globals([...])`.",
            fix=fix,
            severity=Severity.INFO,
        )

    def _unsafe_default(
        self, call: ast.Call, why: str, severity: Severity, confidence: Confidence
    ) -> None:
        edit = append_argument(self.ctx, call, "weights_only=True")
        # With a pickle module, weights_only=True is refused: the only fix is to drop it.
        unsafe_always = _pickle_module(call) is not None
        fix = (
            Fix("Pass `weights_only=True` explicitly", (edit,), Applicability.UNSAFE)
            if edit and not unsafe_always
            else None
        )
        self.report(
            call,
            f"`torch.load(...)` at line {call.lineno} {why}; unrestricted unpickling runs "
            "any code a crafted checkpoint carries",
            fix_hint="Pass `weights_only=True` explicitly so the load is safe on every "
            "torch version."
            if not unsafe_always
            else "Load with the default pickle module and `weights_only=True`; keep "
            "full unpickling only for files you created yourself.",
            severity=severity,
            confidence=confidence,
            fix=fix,
        )
