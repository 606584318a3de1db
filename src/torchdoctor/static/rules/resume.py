"""Resume checkpoints: TD905 incomplete-resume-checkpoint.

A checkpoint dict that holds the model *and* something only a resume needs (the optimizer,
the scheduler, the epoch) is a resume checkpoint; one that holds the model alone is an
export of the weights and is left alone. A file that reads no checkpoint back (no load, no
``resume``) has no resume to be incomplete; and a scheduler whose position is restored from
the saved epoch (``scheduler.last_epoch = start_epoch - 1``, built with
``last_epoch=start_epoch - 1``, or replayed by a loop that only steps schedules, as
I-JEPA's ``for _ in range(start_epoch * ipe): scheduler.step()``) needs no state of its own
in the checkpoint. A ``DataLoader`` or a download is not a load: only a call whose name has
the word ``load`` (``torch.load``, ``load_checkpoint``, ``load_state_dict``) reads one back,
and not a data reader's (``np.load``, ``joblib.load``) nor a helper of the file whose own
body reads none.
A state another save of the file records (``save_optimizer`` beside ``save_model``) is
kept, in its own file; and a class that steps no optimizer, beside unrelated classes that
do, has none to save.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from torchdoctor.findings import Depth, Finding, Severity
from torchdoctor.rules.detectors import detector
from torchdoctor.static import torchapi
from torchdoctor.static.analysis.callers import called_function
from torchdoctor.static.analysis.calls import assigned_names, last_name
from torchdoctor.static.analysis.entries import item_assignments, key_text
from torchdoctor.static.analysis.loops import enclosing_loops, function_trains, step_events, trains
from torchdoctor.static.analysis.related_files import (
    first_in_imported_files,
    first_in_related_files,
)
from torchdoctor.static.bindings import BindingKind
from torchdoctor.static.branches import exclusive
from torchdoctor.static.context import FileContext, Scope
from torchdoctor.static.rules.base import LintRule
from torchdoctor.static.structure import Frame, FunctionScope, Item, Loop
from torchdoctor.static.training import Event, EventKind

MODEL, OPTIMIZER, SCHEDULER, COUNTER = "model", "optimizer", "scheduler", "counter"
_FAMILY_ROLES = {
    torchapi.MODULE: MODEL,
    torchapi.OPTIMIZER: OPTIMIZER,
    torchapi.SCHEDULER: SCHEDULER,
}
_KEY_ROLES: tuple[tuple[frozenset[str], str], ...] = (
    (frozenset({"optim", "optimizer", "optimiser", "optimizers", "opt"}), OPTIMIZER),
    (frozenset({"sched", "scheduler", "schedulers"}), SCHEDULER),
    (
        frozenset(
            {"epoch", "epochs", "step", "steps", "iteration", "iterations", "iter", "iters", "it"}
        ),
        COUNTER,
    ),
    (frozenset({"model", "net", "network", "weights", "module", "encoder", "state"}), MODEL),
)
_TRAINING = frozenset({EventKind.OPTIMIZER_STEP, EventKind.BACKWARD})
_WHAT = {
    OPTIMIZER: "`optimizer.state_dict()`",
    SCHEDULER: "`scheduler.state_dict()`",
    COUNTER: "the epoch (or step) counter",
}
_COST = {
    OPTIMIZER: "the optimizer state (momentum and Adam's moment estimates restart from "
    "zero, which typically shows as a loss spike right after the resume)",
    SCHEDULER: "the LR scheduler state (the learning rate schedule restarts from its first step)",
    COUNTER: "the epoch or step counter (the resumed run starts counting at 0 again, so it "
    "trains too long and every schedule keyed on the epoch is off)",
}


_PLATEAU_COST = (
    "the state of its plateau scheduler (stepped with a metric): the learning rate comes "
    "back with the optimizer's state, but the best value and the epochs without progress "
    "restart, so the next reduction comes up to `patience` epochs late"
)


@detector("TD905", depth=Depth.LINT)
class IncompleteResumeCheckpoint(LintRule):
    """A resume checkpoint dict that lacks the optimizer, the scheduler or the epoch."""

    requires = ("save",)
    call_names = frozenset({"save"})

    def __init__(self, ctx: FileContext, sink: Callable[[Finding], None]) -> None:
        super().__init__(ctx, sink)
        self._saves: list[tuple[ast.Call, tuple[Frame, ...]]] = []

    def visit_call(self, node: ast.Call) -> None:
        if self.ctx.is_call_to(node, "torch.save") and node.args:
            self._saves.append((node, self.ctx.frames))

    def leave_module(self, module: object) -> None:
        if not self._saves:
            return  # no torch.save: the file's steps need no reading
        ctx = self.ctx
        dicts = []  # the saves of a model with some training state: resume checkpoints
        kept: list[tuple[FunctionScope | None, set[str | None]]] = []  # what each save holds
        for call, frames in self._saves:
            scope = ctx.function_of(frames)
            entries = _entries(ctx, call.args[0], scope)
            if entries is None:
                # `torch.save(optimizer.state_dict(), "opt.pt")`: a state in its own file
                kept.append((scope, {_role(ctx, None, call.args[0], scope)}))
                continue
            roles: set[str | None] = set()
            flattened = _flattened(entries)
            for key, value in flattened:
                roles.add(_role(ctx, key, value, scope))
                roles |= _states_named(key)  # `"optimizer_and_scheduler": {...}`
                if _scheduler_attribute(ctx, value, scope):
                    roles.add(SCHEDULER)
            kept.append((scope, roles))
            if MODEL in roles and roles & {OPTIMIZER, SCHEDULER, COUNTER}:
                dicts.append((call, frames, roles, {key for key, _ in flattened}))
        if not dicts:
            return  # the whole-file reads below are paid only where a finding may follow
        reads_back, positioned = _resume_facts(ctx)
        if not reads_back or _reads_weights_only(ctx):
            return  # nothing here resumes: the checkpoints are exports or logs
        positioned = positioned or self._replays_schedules() or _positioned_elsewhere(ctx)
        # Each class's step kinds (None: module-level code and plain functions).
        top = list(step_events(ctx, ctx.module.items, None))
        stepped: dict[ast.ClassDef | None, set[EventKind]] = {None: {e.kind for e in top}}
        # `scheduler.step(val_loss)` everywhere: only a plateau scheduler takes a metric
        plateau_only = _steps_with_a_metric(top)
        for function in ctx.module.functions:
            events = list(step_events(ctx, function.items, function))
            stepped.setdefault(_class_of(function), set()).update(e.kind for e in events)
            plateau_only = plateau_only and _steps_with_a_metric(events)
        kinds = set().union(*stepped.values())
        expected = {COUNTER}
        if EventKind.OPTIMIZER_STEP in kinds and _optimizer_has_state(ctx):
            expected.add(OPTIMIZER)
        if EventKind.SCHEDULER_STEP in kinds and not positioned:
            expected.add(SCHEDULER)
        called = {last_name(n.func) for n in ast.walk(ctx.tree) if isinstance(n, ast.Call)}
        counted_keys = _keys_counters_are_read_from(ctx)
        for call, frames, roles, keys in dicts:
            loops = enclosing_loops(ctx, frames)
            wanted = expected if any(trains(ctx, loop) for loop in loops) else expected - {COUNTER}
            wanted = wanted - _stepped_only_elsewhere(ctx, frames, stepped)
            wanted = wanted - _kept_elsewhere(ctx.function_of(frames), kept, called)
            if loops and _builds_an_optimizer(ctx, loops[0]):
                # Rebuilt every pass of the loop that saves (a head resized by each
                # epoch's clustering): no optimizer state outlives a pass, so none is lost.
                # A loop of stages around the saving loop does not count: within a stage
                # the state lives on from epoch to epoch.
                wanted = wanted - {OPTIMIZER}
            if _counter_in_path(ctx, call, frames):
                roles = roles | {COUNTER}  # `f"{step}.pt"`: the file name keeps the count
            if keys & counted_keys:
                roles = roles | {COUNTER}  # `start_epoch = pickle.loads(ckpt["stats"]).epoch`
            missing = [
                role
                for role in (OPTIMIZER, SCHEDULER, COUNTER)
                if role in wanted and role not in roles
            ]
            if (
                missing == [SCHEDULER]
                and {OPTIMIZER, COUNTER} <= roles
                and _loads_weights_only(ctx)
            ):
                # The checkpoint keeps the optimizer and the count, yet the "resume" reads
                # back only the weights (PointMLP): the run starts over at epoch 0 with a
                # new optimizer, and a schedule from its first step goes with that.
                continue
            if missing == [SCHEDULER] and OPTIMIZER in roles and _multiplies_each_step(ctx):
                # MotionBERT's StepLR(step_size=1): each step multiplies the learning rate
                # the optimizer holds, and the optimizer's state brings it back decayed,
                # so the schedule goes on from there without its own state.
                continue
            if missing:
                self._report(call, missing, plateau_only and OPTIMIZER in roles)

    def _replays_schedules(self) -> bool:
        """A loop that only steps schedules (``scheduler.step()``, ``next(momentum)``) and at
        least one scheduler: a resume fast-forwarding them to the saved position."""
        ctx = self.ctx
        for loop in ctx.module.all_loops:
            body = loop.node.body
            helpers = [_schedule_helper(ctx, statement, loop.function) for statement in body]
            if not all(_advances(s) or h is not None for s, h in zip(body, helpers, strict=True)):
                continue
            kinds = {event.kind for event in step_events(ctx, loop.items, loop.function)}
            for helper in filter(None, helpers):
                kinds |= {event.kind for event in step_events(ctx, helper.items, helper)}
            if EventKind.SCHEDULER_STEP in kinds and not kinds & _TRAINING:
                return True  # optimizer.step(closure) with a schedule is a training loop
        return False

    def _report(self, call: ast.Call, missing: list[str], plateau: bool = False) -> None:
        # A plateau scheduler's learning rate lives in the optimizer's state, which the
        # checkpoint holds: losing the scheduler resets only its patience counters.
        only_plateau = plateau and missing == [SCHEDULER]
        costs = [
            _PLATEAU_COST if only_plateau and role == SCHEDULER else _COST[role] for role in missing
        ]
        self.report(
            call,
            f"The resume checkpoint saved at line {call.lineno} holds the model but not "
            + "; nor ".join(costs),
            fix_hint=f"Add {' and '.join(_WHAT[role] for role in missing)} to the checkpoint, "
            "next to the model's `state_dict()`, and restore them when resuming.",
            evidence={"missing": missing},
            severity=Severity.INFO if only_plateau else None,
        )


def _steps_with_a_metric(events: list[Event]) -> bool:
    """Every scheduler step among ``events`` is given a value (``scheduler.step(loss)``)."""
    return all(
        isinstance(e.node, ast.Call) and bool(e.node.args)
        for e in events
        if e.kind is EventKind.SCHEDULER_STEP
    )


def _kept_elsewhere(
    function: FunctionScope | None,
    kept: list[tuple[FunctionScope | None, set[str | None]]],
    called: set[str],
) -> set[str]:
    """The optimizer or scheduler state another save of the file records, in a file of its
    own: the model and its optimizer saved side by side by two helpers (DeepSDF's
    ``save_model`` and ``save_optimizer``), or a best-model export beside a full
    checkpoint. The other save's function must be among the names ``called`` in the file;
    one in another method of the same name is an override, which runs instead of this
    one."""
    name = function.name if function is not None else None
    found: set[str] = set()
    for where, roles in kept:
        roles_kept = {role for role in (OPTIMIZER, SCHEDULER) if role in roles} - found
        if not roles_kept:
            continue
        if (
            where is not None
            and where is not function
            and (where.name == name or where.name not in called)
        ):
            continue  # an override, or a helper nothing calls
        found |= roles_kept
    return found


def _class_of(function: FunctionScope) -> ast.ClassDef | None:
    """The class a function is a method of, or is nested in a method of."""
    scope: FunctionScope | None = function
    while scope is not None and scope.owner is None:
        scope = scope.parent
    return scope.owner.node if scope is not None and scope.owner is not None else None


def _stepped_only_elsewhere(
    ctx: FileContext,
    frames: tuple[Frame, ...],
    stepped: dict[ast.ClassDef | None, set[EventKind]],
) -> set[str]:
    """The roles a save in a method need not hold because its class never steps them: the
    optimizer (or scheduler) steps of the file are all in methods of unrelated classes (a
    decision-tree trainer beside the torch trainers of the same file). Related classes,
    bases and subclasses defined in the file, share their steps."""
    function = ctx.function_of(frames)
    owner = _class_of(function) if function is not None else None
    if owner is None:
        return set()
    related = _related_classes(ctx.tree, owner)
    mine = set().union(*(stepped.get(c, set()) for c in related))
    others = set().union(*(kinds for c, kinds in stepped.items() if c not in related))
    unneeded = set()
    for kind, role in (
        (EventKind.OPTIMIZER_STEP, OPTIMIZER),
        (EventKind.SCHEDULER_STEP, SCHEDULER),
    ):
        if kind in others and kind not in mine:
            unneeded.add(role)
    return unneeded


def _related_classes(tree: ast.AST, start: ast.ClassDef) -> list[ast.ClassDef]:
    """``start`` with its bases and subclasses among the file's classes, transitively."""
    classes = [node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]
    by_name = {c.name: c for c in classes}
    bases = {c.name: {last_name(b) for b in c.bases} for c in classes}
    related = {start.name}
    grown = True
    while grown:
        grown = False
        for c in classes:
            if c.name in related:
                new = {b for b in bases[c.name] if b in by_name} - related
            elif bases[c.name] & related:
                new = {c.name}
            else:
                continue
            if new:
                related |= new
                grown = True
    return [start, *(by_name[name] for name in related if by_name[name] is not start)]


def _resume_facts(ctx: FileContext) -> tuple[bool, bool]:
    """Whether the file reads a checkpoint back (a ``load`` call that may read one, or a
    name or attribute saying ``resume``), and whether it sets a scheduler's position from
    a counter (``x.last_epoch = ...``, or a ``last_epoch`` other than a constant when
    building one, by keyword or position)."""
    reads_back = any(
        _may_read_a_checkpoint(ctx, item.node, scope)
        and not _read_apart_from_training(ctx, item, scope)
        for scope, items in ctx.module.bodies()
        for item in items
        if isinstance(item.node, ast.Call)
    )
    positioned = False
    for node in ast.walk(ctx.tree):
        positioned = positioned or _sets_a_position(node)
        if isinstance(node, ast.Call):
            # `scheduler.step(epoch - 1 + step / total)`, `scheduler.step(epoch=epoch)`: the
            # epoch given sets the position
            given = [*node.args[:1], *(k.value for k in node.keywords if k.arg == "epoch")]
            positioned = positioned or (last_name(node.func) == "step" and _names_epoch(given))
        elif isinstance(node, (ast.Name, ast.Attribute)):
            text = node.id if isinstance(node, ast.Name) else node.attr
            reads_back = reads_back or "resum" in text.lower()
        if reads_back and positioned:
            break
    return reads_back, positioned


def _read_apart_from_training(ctx: FileContext, read: Item, scope: FunctionScope | None) -> bool:
    """gsplat's ``if cfg.ckpt is not None: ckpts = [torch.load(f) ...]; runner.eval(...)``
    and ``else: runner.train()``: every call of the read's function that trains sits on
    the other side of a test from the read, and no loop of the function trains. What the
    read brings back is evaluated, never trained on: no resume."""
    items = scope.items if scope is not None else ctx.module.items
    loops = scope.loops if scope is not None else ctx.module.loops
    if any(trains(ctx, loop) for loop in loops):
        return False
    training = [
        item
        for item in items
        if isinstance(item.node, ast.Call)
        and (called := called_function(ctx, item.node, scope)) is not None
        and called is not scope
        and function_trains(ctx, called)
    ]
    return bool(training) and all(exclusive(ctx, read, item) for item in training)


def _may_read_a_checkpoint(
    ctx: FileContext, call: ast.Call, scope: FunctionScope | None, depth: int = 0
) -> bool:
    """Whether a call may read a checkpoint back: its name says ``load``, it is no data
    or settings reader (``np.load``, ``joblib.load``, ``json.load``), and, when it is a
    function of this file, its own body has such a call (eeg-gcnn's
    ``_load_memory_mapped_array`` only reloads feature arrays with joblib)."""
    if "load" not in torchapi.name_tokens(last_name(call.func)):
        return False
    if _reads_data(ctx, call, scope):
        return False
    local = ctx.resolve_local_call(call, scope)
    if local is None or depth >= 3:
        return True
    return any(
        _may_read_a_checkpoint(ctx, inner, local, depth + 1)
        for inner in ast.walk(local.node)
        if isinstance(inner, ast.Call)
    )


def _names_epoch(arguments: list[ast.expr]) -> bool:
    """An argument that reads an epoch counter (``epoch``, ``args.epoch``, ``ep + i/n``)."""
    return any(
        "epoch" in torchapi.name_tokens(n.id if isinstance(n, ast.Name) else n.attr)
        for argument in arguments
        for n in ast.walk(argument)
        if isinstance(n, (ast.Name, ast.Attribute))
    )


def _reads_weights_only(ctx: FileContext) -> bool:
    """Whether every checkpoint the file reads back gives only a model's weights: each
    ``torch.load`` result goes straight into ``load_state_dict`` or is bound to a name
    read only as ``ckpt["state_dict"]``-like entries. A pre-trained model loaded to be
    fine-tuned is not a resume; reading its ``"epoch"`` or ``"optimizer"`` would be, and so
    would a load in code that calls itself a resume (``def resume(...)``, ``args.resume``)."""
    return not _calls_itself_a_resume(ctx) and _loads_weights_only(ctx)


def _calls_itself_a_resume(ctx: FileContext) -> bool:
    for node in ast.walk(ctx.tree):
        name = (
            node.name
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            else node.id
            if isinstance(node, ast.Name)
            else node.attr
            if isinstance(node, ast.Attribute)
            else ""
        )
        if "resum" in name.lower():
            return True
    return False


def _loads_weights_only(ctx: FileContext) -> bool:
    """Every load of the file gives back only a model's weights (see
    :func:`_reads_weights_only`), whatever the code calls itself."""
    loads = 0
    for scope, items in ctx.module.bodies():
        for item in items:
            node = item.node
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            last = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if last == "load_state_dict" or "load" not in torchapi.name_tokens(last):
                continue
            if not ctx.is_call_to(node, "torch.load", scope=scope):
                if _reads_data(ctx, node, scope):
                    continue  # `OmegaConf.load(args.config)`, `LoadImaged(...)`: not a state
                if ctx.resolve_local_call(node, scope) is not None:
                    continue  # a function of the file: its own loads are judged in its body
                if _loads_a_model(ctx, node, scope):
                    loads += 1
                    continue  # `model = attempt_load(weights)`: a model, not a run's state
                return False  # a helper of the project's: what it restores is not seen
            loads += 1
            if not _weights_of(ctx, node, scope):
                return False
    return loads > 0


# Libraries (or their data modules) whose ``load`` reads settings, arrays, tables or
# media, or files ``torch.save`` never writes (``torchfile``: Lua Torch's ``.t7``, as
# AesPA-Net's pretrained VGG): a run's configuration, data or inputs, never its state.
_DATA_READERS = frozenset(
    {"json", "yaml", "omegaconf", "toml", "tomllib", "tomli", "numpy", "joblib", "pandas"}
    | {"h5py", "scipy", "PIL", "cv2", "imageio", "librosa", "soundfile", "torchaudio"}
    | {"datasets", "monai.transforms", "monai.data", "torchvision.io", "torchfile"}
)
# Words of a loader's name that say it reads settings or data (`load_config`,
# `load_dataset`, `LoadImaged`), not a checkpoint.
_DATA_WORDS = frozenset(
    {"config", "cfg", "conf", "settings", "json", "yaml", "data", "dataset", "datasets"}
    | {"image", "images", "img", "audio", "wav", "text", "vocab", "tokenizer", "csv"}
    | {"labels", "annotations", "features"}
)


def _reads_data(ctx: FileContext, call: ast.Call, scope: FunctionScope | None) -> bool:
    """A ``load`` call that reads configuration or data: a data library's (``np.load``,
    ``OmegaConf.load``, MONAI's ``LoadImaged``), or one named for what it reads
    (``load_config``, ``load_dataset``)."""
    qualified = ctx.qualified_name(call.func, scope) or ""
    if any(qualified == r or qualified.startswith(r + ".") for r in _DATA_READERS):
        return True
    return not _DATA_WORDS.isdisjoint(torchapi.name_tokens(last_name(call.func) or ""))


def _loads_a_model(ctx: FileContext, load: ast.Call, scope: FunctionScope | None) -> bool:
    """``model = attempt_load(path)``, ``net = load_pretrained(...)``: the helper's result
    is bound to a name that says model, so what it reads back is a model to train or
    evaluate, not the optimizer and counters a resume needs."""
    body = scope.node if scope is not None else ctx.tree
    for node in ast.walk(body):
        if isinstance(node, ast.Assign) and node.value is load and len(node.targets) == 1:
            target = node.targets[0]
            name = last_name(target) if isinstance(target, (ast.Name, ast.Attribute)) else None
            return bool(name) and torchapi.hinted_family(name) == torchapi.MODULE
    return False


def _weights_of(ctx: FileContext, load: ast.Call, scope: FunctionScope | None) -> bool:
    body = scope.node if scope is not None else ctx.tree
    parents = {id(child): node for node in ast.walk(body) for child in ast.iter_child_nodes(node)}
    parent = parents.get(id(load))
    if isinstance(parent, ast.Call) and last_name(parent.func) == "load_state_dict":
        return True
    if isinstance(parent, ast.Subscript):
        return _model_key(parent.slice)
    if isinstance(parent, ast.Attribute) and isinstance(parents.get(id(parent)), ast.Call):
        # `print(torch.load(path).keys())`: the checkpoint shown, nothing restored
        return _only_shown(parents[id(parent)], parents)
    if not (
        isinstance(parent, ast.Assign)
        and len(parent.targets) == 1
        and isinstance(parent.targets[0], ast.Name)
    ):
        return False
    name = parent.targets[0].id
    after = (parent.end_lineno or parent.lineno, parent.end_col_offset or 0)
    for node in ast.walk(body):
        if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Load):
            if (node.lineno, node.col_offset) < after:
                continue  # an earlier value of the name (the path the load read)
            use = parents.get(id(node))
            if isinstance(use, ast.Subscript) and use.value is node:
                if _restores_state(use.slice) and not _only_shown(use, parents):
                    return False
            elif (
                _membership_test(use, node)
                or _weights_or_whole(use, node, name)
                or _presence_test(use, node)
            ):
                continue  # `"step" in ckpt`; `ckpt["state_dict"] if ... else ckpt`; `if ckpt:`
            elif not (isinstance(use, ast.Call) and last_name(use.func) == "load_state_dict"):
                return False
    return True


def _restores_state(key: ast.expr) -> bool:
    """Whether reading ``ckpt[key]`` may restore training state: a key naming the
    optimizer, the scheduler, a counter or the AMP scaler, or one lint cannot read. The
    weights, and values such as a UNet's ``"scale_factor"`` or a ``"best_acc"``, are
    not a resume's."""
    if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
        return True
    if _model_key(key):
        return False
    words = set(torchapi.name_tokens(key.value))
    return bool(words & _SCALER_WORDS) or any(
        words & hints for hints, role in _KEY_ROLES if role != MODEL
    )


_SCALER_WORDS = frozenset({"scaler", "amp"})


def _presence_test(use: ast.AST | None, name: ast.Name) -> bool:
    """``if model_data:``, ``if ckpt is None:``, ``assert ckpt``: whether the load gave
    anything, not what it restores."""
    if isinstance(use, (ast.If, ast.While, ast.IfExp, ast.Assert)) and use.test is name:
        return True
    if isinstance(use, ast.UnaryOp) and isinstance(use.op, ast.Not):
        return True
    return (
        isinstance(use, ast.Compare)
        and len(use.ops) == 1
        and isinstance(use.ops[0], (ast.Is, ast.IsNot))
        and use.left is name
        and isinstance(use.comparators[0], ast.Constant)
        and use.comparators[0].value is None
    )


def _membership_test(use: ast.AST | None, name: ast.Name) -> bool:
    """``"global_step" in ckpt``: asks what the file holds, restores nothing."""
    return (
        isinstance(use, ast.Compare)
        and len(use.ops) == 1
        and isinstance(use.ops[0], (ast.In, ast.NotIn))
        and use.comparators[0] is name
    )


def _weights_or_whole(use: ast.AST | None, name: ast.Name, held: str) -> bool:
    """``ckpt["state_dict"] if "state_dict" in ckpt else ckpt``: the weights, saved either
    inside a dict or as the whole file."""
    if not isinstance(use, ast.IfExp) or name not in (use.body, use.orelse):
        return False
    other = use.orelse if use.body is name else use.body
    return (
        isinstance(other, ast.Subscript)
        and isinstance(other.value, ast.Name)
        and other.value.id == held
        and _model_key(other.slice)
    )


# Calls that only show a value: printing and logging.
_SHOWING = frozenset({"print", "info", "debug", "warning", "log", "write", "set_description"})


def _only_shown(use: ast.AST, parents: dict[int, ast.AST]) -> bool:
    """``print(f"step {ckpt['global_step']}")``: an entry read only to be printed or
    logged (through an f-string or ``format``) is not restored."""
    node: ast.AST | None = parents.get(id(use))
    while node is not None:
        if isinstance(node, ast.Call):
            name = last_name(node.func)
            if name in _SHOWING or name.endswith("print"):
                return True
            if name != "format":
                return False
        elif not isinstance(node, (ast.JoinedStr, ast.FormattedValue)):
            return False
        node = parents.get(id(node))
    return False


def _model_key(key: ast.expr) -> bool:
    if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
        return False
    words = set(torchapi.name_tokens(key.value))
    return any(words & hints for hints, role in _KEY_ROLES if role == MODEL) and not any(
        words & hints for hints, role in _KEY_ROLES if role != MODEL
    )


def _advances(statement: ast.stmt) -> bool:
    """A statement that only advances a schedule: ``x.step()`` or ``next(x)``."""
    if not (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)):
        return False
    func = statement.value.func
    if isinstance(func, ast.Attribute):
        return func.attr == "step"
    return isinstance(func, ast.Name) and func.id == "next"


def _schedule_helper(
    ctx: FileContext, statement: ast.stmt, scope: FunctionScope | None
) -> FunctionScope | None:
    """The function of the file that ``statement`` only calls, when that function steps a
    scheduler and trains nothing (ResShift's resume replays ``self.adjust_lr(ii)`` up to
    the saved iteration, and ``adjust_lr`` steps the scheduler)."""
    if not (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)):
        return None
    helper = ctx.resolve_local_call(statement.value, scope)
    if helper is None:
        return None
    kinds = {event.kind for event in step_events(ctx, helper.items, helper)}
    return helper if EventKind.SCHEDULER_STEP in kinds and not kinds & _TRAINING else None


def _positioned_elsewhere(ctx: FileContext) -> bool:
    """Whether the resume hands the loaded checkpoint whole to code of the program (PyMIC's
    ``self.create_optimizer(params, checkpoint)``, defined in a base class of another
    module) and a module along the file's folder line, or one it imports, builds a
    scheduler at a position read from a counter. The position comes back there."""
    if not _hands_the_checkpoint_on(ctx):
        return False
    found = first_in_related_files(ctx, "scheduler-position", _positions_a_scheduler)
    return bool(found or first_in_imported_files(ctx, _positions_a_scheduler))


# Calls a checkpoint is handed to that only show it or read its weights.
_NOT_HANDED_ON = frozenset({"load_state_dict", "print", "info", "debug", "warning", "log"})


def _hands_the_checkpoint_on(ctx: FileContext) -> bool:
    """Whether a call of the file, not torch's, gets a ``torch.load`` result whole: the
    name bound to the load, or a name bound to that name (``ckpt_for_optm = checkpoint``)."""
    for scope, items in ctx.module.bodies():
        loaded: set[str] = set()
        for item in items:
            node = item.node
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target, value = node.targets[0], node.value
                loads = isinstance(value, ast.Call) and ctx.is_call_to(
                    value, "torch.load", scope=scope
                )
                if isinstance(target, ast.Name) and (
                    loads or (isinstance(value, ast.Name) and value.id in loaded)
                ):
                    loaded.add(target.id)
        if not loaded:
            continue
        for item in items:
            node = item.node
            if not isinstance(node, ast.Call) or last_name(node.func) in _NOT_HANDED_ON:
                continue
            if (ctx.qualified_name(node.func, scope) or "").startswith("torch."):
                continue
            arguments = [*node.args, *(k.value for k in node.keywords)]
            if any(isinstance(a, ast.Name) and a.id in loaded for a in arguments):
                return True
    return False


def _positions_a_scheduler(path: str, data: bytes) -> bool | None:
    """True when the module's text builds a torch scheduler with a ``last_epoch`` that is not
    a constant (by keyword, or at its place among the positional arguments, as PyMIC's
    ``MultiStepLR(optimizer, milestones, gamma, epoch_last)``), or sets ``.last_epoch``."""
    if b"last_epoch" not in data and b"LR(" not in data:
        return None  # the cheap test first: most modules build no scheduler
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError):
        return None
    return True if any(_sets_a_position(node) for node in ast.walk(tree)) else None


def _sets_a_position(node: ast.AST) -> bool:
    """``x.last_epoch = ...``, or a scheduler built with a ``last_epoch`` that is not a
    constant, by keyword or at its place among the positional arguments."""
    if isinstance(node, ast.Attribute):
        return node.attr == "last_epoch" and isinstance(node.ctx, ast.Store)
    if not isinstance(node, ast.Call):
        return False
    if any(k.arg == "last_epoch" and not _is_constant(k.value) for k in node.keywords):
        return True
    place = torchapi.LAST_EPOCH_PLACE.get(last_name(node.func) or "")
    return place is not None and len(node.args) > place and not _is_constant(node.args[place])


def _multiplies_each_step(ctx: FileContext) -> bool:
    """Every scheduler the file builds, and at least one, multiplies the optimizer's
    current learning rate by a constant at each step whatever its count: ``ExponentialLR``
    and ``StepLR`` with ``step_size=1``. Any other schedule, or a call whose name says it
    builds one (``get_cosine_schedule_with_warmup``), reads its position."""
    built = [
        node
        for node in ast.walk(ctx.tree)
        if isinstance(node, ast.Call) and _builds_a_scheduler(last_name(node.func) or "")
    ]
    return bool(built) and all(_multiplicative(node) for node in built)


def _builds_a_scheduler(name: str) -> bool:
    tokens = torchapi.name_tokens(name)
    return name in torchapi.LAST_EPOCH_PLACE or bool({"scheduler", "schedule"} & set(tokens))


def _multiplicative(call: ast.Call) -> bool:
    name = last_name(call.func)
    if name == "ExponentialLR":
        return True
    if name != "StepLR":
        return False
    step_size = next((k.value for k in call.keywords if k.arg == "step_size"), None)
    if step_size is None and len(call.args) > 1:
        step_size = call.args[1]
    return isinstance(step_size, ast.Constant) and step_size.value == 1


def _is_constant(value: ast.expr) -> bool:
    while isinstance(value, ast.UnaryOp):
        value = value.operand
    return isinstance(value, ast.Constant)


def _optimizer_has_state(ctx: FileContext) -> bool:
    """False only when every optimizer the file builds is plain SGD without momentum, whose
    state_dict holds nothing to restore."""
    scopes: list[FunctionScope | None] = [None, *ctx.module.functions]
    built = [
        (item.node, scope)
        for scope in scopes
        for item in (scope.items if scope is not None else ctx.module.items)
        if isinstance(item.node, ast.Call)
    ]
    optimizers = [
        (call, scope)
        for call, scope in built
        if (name := ctx.instance_type(call, scope)) is not None
        and ctx.is_family(name, torchapi.OPTIMIZER)
    ]
    return not optimizers or not all(
        ctx.is_call_to(call, "torch.optim.SGD", scope=scope) and _without_momentum(call)
        for call, scope in optimizers
    )


def _builds_an_optimizer(ctx: FileContext, loop: Loop) -> bool:
    """Whether the loop assigns a newly built optimizer (``optimizer = Adam(...)``)."""
    return any(
        isinstance(item.node, ast.Assign)
        and isinstance(item.node.value, ast.Call)
        and (name := ctx.instance_type(item.node.value, loop.function)) is not None
        and ctx.is_family(name, torchapi.OPTIMIZER)
        for item in loop.items
    )


def _without_momentum(call: ast.Call) -> bool:
    momentum = next(
        (k.value for k in call.keywords if k.arg == "momentum"),
        call.args[2] if len(call.args) > 2 else None,
    )
    return momentum is None or (isinstance(momentum, ast.Constant) and momentum.value == 0)


def _entries(
    ctx: FileContext, saved: ast.expr, scope: Scope
) -> list[tuple[str | None, ast.expr]] | None:
    """The ``(key, value)`` pairs of a saved dict (a literal, ``dict(...)``, or a name bound
    to one and filled with ``ckpt[key] = value``); ``None`` when lint cannot see them all."""
    if isinstance(saved, ast.Name):
        binding = ctx.binding(saved, scope)
        if binding is None or binding.kind is not BindingKind.ASSIGN or binding.value is None:
            return None
        entries = _literal_entries(binding.value)
        if entries is None:
            return None
        return entries + list(item_assignments(ctx, saved.id, scope))
    return _literal_entries(saved)


def _flattened(
    entries: list[tuple[str | None, ast.expr]], depth: int = 0
) -> list[tuple[str | None, ast.expr]]:
    """The entries with those of nested dict literals: a checkpoint may keep its counters
    (``{"counters": {"t": t, "epoch": epoch}}``) or its states under a sub-dict."""
    out = list(entries)
    if depth < 2:
        for _, value in entries:
            nested = _literal_entries(value)
            if nested:
                out += _flattened(nested, depth + 1)
    return out


def _literal_entries(expr: ast.expr) -> list[tuple[str | None, ast.expr]] | None:
    if isinstance(expr, ast.Dict):
        if any(key is None for key in expr.keys):
            return None  # {**other, ...}
        return [(key_text(key), value) for key, value in zip(expr.keys, expr.values, strict=True)]
    if (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Name)
        and expr.func.id == "dict"
        and not expr.args
        and all(k.arg for k in expr.keywords)
    ):
        return [(k.arg, k.value) for k in expr.keywords]
    return None


def _role(ctx: FileContext, key: str | None, value: ast.expr, scope: Scope) -> str | None:
    """What an entry holds, from its value's class when visible, else from its key."""
    subject = value
    if (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr == "state_dict"
    ):
        subject = value.func.value
    if isinstance(subject, (ast.Name, ast.Attribute, ast.Subscript)):
        found = ctx.family_of(subject, scope)
        if found is not None and found[0] in _FAMILY_ROLES:
            return _FAMILY_ROLES[found[0]]
    words = set(torchapi.name_tokens(key or ""))
    for hints, role in _KEY_ROLES:
        if words & hints:
            return role
    return None


def _scheduler_attribute(ctx: FileContext, value: ast.expr, scope: Scope) -> bool:
    """``self.scheduler.model_step``, ``scheduler.last_epoch``: an attribute of the
    scheduler itself, which is where a schedule keeps its position (EfficientConformer's
    own schedule classes count their steps in ``model_step``, saved so and assigned back
    on resume)."""
    if not isinstance(value, ast.Attribute):
        return False
    holder = value.value
    if isinstance(holder, ast.Attribute):
        name = holder.attr
    elif isinstance(holder, ast.Name):
        name = holder.id
    else:
        return False
    return _role(ctx, name, holder, scope) == SCHEDULER


def _states_named(key: str | None) -> set[str | None]:
    """The optimizer and scheduler roles a key's words name: one entry may hold both
    (VQ-Diffusion's ``"optimizer_and_scheduler"``)."""
    words = set(torchapi.name_tokens(key or ""))
    return {role for hints, role in _KEY_ROLES if role in (OPTIMIZER, SCHEDULER) and words & hints}


def _keys_counters_are_read_from(ctx: FileContext) -> set[str | None]:
    """The keys of a loaded checkpoint from which the file reads an epoch or step counter
    back: ``start_epoch = stats.epoch`` where ``stats = pickle.loads(ckpt["stats"])`` and
    ``ckpt = torch.load(path)`` (PyTorch3D's NeRF keeps its epoch in a pickled stats
    object), followed through a few assignments. A save with an entry under such a key
    keeps the count, whatever the key is called."""
    keys: set[str | None] = set()
    for scope, items in ctx.module.bodies():
        for item in items:
            node = item.node
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
                continue
            target = node.targets[0]
            name = target.id if isinstance(target, ast.Name) else getattr(target, "attr", "")
            if not set(torchapi.name_tokens(name)) & _COUNTER_WORDS:
                continue
            keys |= _loaded_keys(ctx, node.value, scope, 0)
    return keys


def _loaded_keys(ctx: FileContext, value: ast.expr, scope: Scope, depth: int) -> set[str | None]:
    """The keys ``value`` reads out of a ``torch.load`` result, through the names it uses."""
    found: set[str | None] = set()
    for node in ast.walk(value):
        if isinstance(node, ast.Subscript) and _is_a_load(ctx, node.value, scope):
            found.add(key_text(node.slice))
        elif isinstance(node, ast.Name) and depth < 3:
            binding = ctx.binding(node, scope)
            if binding is not None and binding.kind is BindingKind.ASSIGN and binding.value:
                found |= _loaded_keys(ctx, binding.value, scope, depth + 1)
    return found


def _is_a_load(ctx: FileContext, expr: ast.expr, scope: Scope) -> bool:
    """``torch.load(...)`` itself, or a name bound to it."""
    if isinstance(expr, ast.Name):
        binding = ctx.binding(expr, scope)
        expr = binding.value if binding is not None and binding.value is not None else expr
    return isinstance(expr, ast.Call) and ctx.is_call_to(expr, "torch.load", scope=scope)


_COUNTER_WORDS = frozenset({"epoch", "step", "iteration", "iter"})


def _counter_in_path(ctx: FileContext, call: ast.Call, frames: tuple[Frame, ...]) -> bool:
    """Whether the file name ``torch.save`` writes is formatted from a counter of the loop
    around it (``"{}.pth".format(step)``, ``f"{epoch}.pt"``, ``str(i).zfill(6)``): a name
    the loop binds, as its target or inside it. A resume that reads the count back from
    the name (``--restore_step``, the file's stem) has it."""
    path = call.args[1] if len(call.args) > 1 else None
    path = path or next((k.value for k in call.keywords if k.arg == "f"), None)
    if path is None or isinstance(path, ast.Constant):
        return False
    used = {n.id for n in ast.walk(path) if isinstance(n, ast.Name)}
    for loop in enclosing_loops(ctx, frames):
        node = loop.node
        bound: set[str] = set()
        if isinstance(node, (ast.For, ast.AsyncFor)):
            bound |= {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
        for item in loop.items:
            bound |= assigned_names(item.node)
        if used & bound:
            return True
    return False
