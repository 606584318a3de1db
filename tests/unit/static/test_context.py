"""FileContext: name resolution through imports, bindings, classes and families."""

from __future__ import annotations

import ast
import textwrap
import warnings

import pytest

from torchdoctor.findings import Confidence
from torchdoctor.static import torchapi
from torchdoctor.static.context import FileContext
from torchdoctor.static.walker import Walker


def context(source: str) -> FileContext:
    """A context whose structure has been walked, as rules see it at module end."""
    text = textwrap.dedent(source)
    ctx = FileContext("x.py", text, ast.parse(text))
    Walker(ctx, structure=True).walk()
    return ctx


def last_call(ctx: FileContext) -> ast.Call:
    calls = [n for n in ast.walk(ctx.tree) if isinstance(n, ast.Call)]
    return max(calls, key=lambda c: (c.lineno, c.col_offset))


@pytest.mark.parametrize(
    "imports, expression",
    [
        ("import torch", "torch.nn.CrossEntropyLoss"),
        ("import torch as T", "T.nn.CrossEntropyLoss"),
        ("from torch import nn", "nn.CrossEntropyLoss"),
        ("import torch.nn as nn", "nn.CrossEntropyLoss"),
        ("from torch.nn import CrossEntropyLoss as CE", "CE"),
        ("from torch.nn.modules.loss import CrossEntropyLoss", "CrossEntropyLoss"),
        ("import torch.nn\nLoss = torch.nn.CrossEntropyLoss", "Loss"),
    ],
)
def test_every_import_spelling_resolves_to_one_name(imports: str, expression: str) -> None:
    ctx = context(f"{imports}\ncriterion = {expression}()\n")
    assert ctx.is_call_to(last_call(ctx), "torch.nn.CrossEntropyLoss", scope=None)


def test_functional_and_optimizer_aliases() -> None:
    ctx = context("""
    import torch.nn.functional as F
    from torch.optim import AdamW as Opt
    from torch.utils.data import DataLoader as DL
    a = F.cross_entropy(x, y)
    b = Opt(params)
    c = DL(ds)
    """)
    calls = sorted(
        (n for n in ast.walk(ctx.tree) if isinstance(n, ast.Call)), key=lambda c: c.lineno
    )
    names = [ctx.qualified_name(c.func, None) for c in calls]
    assert names == [
        "torch.nn.functional.cross_entropy",
        "torch.optim.AdamW",
        "torch.utils.data.DataLoader",
    ]


def test_unimported_names_do_not_resolve() -> None:
    ctx = context("nn.Linear(2, 2)\n")
    assert ctx.qualified_name(last_call(ctx).func, None) is None


def test_binding_is_the_latest_before_the_use() -> None:
    ctx = context("""
    import torch
    def train(model):
        opt = None
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        opt.step()
    """)
    function = ctx.module.functions[0]
    step = last_call(ctx)
    assert ctx.instance_type(step.func.value, function) == "torch.optim.SGD"
    assert ctx.family_of(step.func.value, function) == (torch_optimizer(), Confidence.HIGH)


def test_names_bound_in_except_handlers_and_match_cases_are_bindings() -> None:
    """iBOT's fallback: ``try: bank = torch.load(...) except: ... bank = bank.cpu()``;
    the assignment in the handler is what reaches the save after it."""
    ctx = context("""
    import torch
    def main(path, command):
        try:
            bank = torch.load(path)
        except FileNotFoundError:
            bank = torch.zeros(3)
            bank = bank.cpu()
        match command:
            case "sgd":
                opt = torch.optim.SGD([bank], lr=0.1)
        torch.save(bank, path)
        opt.step()
    """)
    function = ctx.module.functions[0]
    save, step = sorted(
        (n for n in ast.walk(ctx.tree) if isinstance(n, ast.Call) and n.lineno >= 12),
        key=lambda c: c.lineno,
    )[:2]
    saved = save.args[0]
    assert isinstance(saved, ast.Name)
    binding = ctx.binding(saved, function)
    assert binding is not None and ast.unparse(binding.value) == "bank.cpu()"
    assert ctx.instance_type(step.func.value, function) == "torch.optim.SGD"


def torch_optimizer() -> str:
    return torchapi.OPTIMIZER


def test_self_attribute_bound_in_init_and_chained_to() -> None:
    ctx = context("""
    import torch
    from torch import nn
    class Net(nn.Module):
        pass
    class Trainer:
        def __init__(self):
            self.model = Net().to("cuda")
            self.scaler = torch.amp.GradScaler("cuda")
        def fit(self):
            self.model(1)
    """)
    fit = ctx.module.functions[-1]
    call = last_call(ctx)
    assert ctx.instance_type(call.func, fit) == "<local>.Net"
    assert ctx.is_in_family(call.func, torchapi.MODULE, fit)


def test_annotation_of_a_parameter_gives_its_type() -> None:
    ctx = context("""
    from torch.optim import Optimizer
    def step(o: Optimizer):
        o.step()
    """)
    function = ctx.module.functions[0]
    assert ctx.family_of(last_call(ctx).func.value, function) == (
        torchapi.OPTIMIZER,
        Confidence.HIGH,
    )


def _model_in(ctx: FileContext, function_name: str) -> ast.expr:
    """The callee of the last ``model(...)``-style call inside ``function_name``."""
    function = next(f for f in ctx.module.functions if f.name == function_name)
    calls = [i.node for i in function.items if isinstance(i.node, ast.Call)]
    return max(calls, key=lambda c: (c.lineno, c.col_offset)).func


PASSED = """
import torch
from torch import nn
class Net(nn.Module):
    pass
class Other(nn.Module):
    pass
def run(model, x):
    return model(x)
class Trainer:
    def __init__(self, model: nn.Module):
        self.model = model
    def step(self, x):
        return self.model(x)
"""


def test_a_parameter_takes_the_class_every_caller_passes() -> None:
    ctx = context(PASSED + "run(Net().to('cpu'), 1)\nrun(model=Net(), x=2)\nTrainer(Net())\n")
    run = next(f for f in ctx.module.functions if f.name == "run")
    assert ctx.instance_type(_model_in(ctx, "run"), run) == "<local>.Net"
    step = next(f for f in ctx.module.functions if f.name == "step")
    # through the constructor's parameter, over its loose `nn.Module` annotation
    assert ctx.instance_type(_model_in(ctx, "step"), step) == "<local>.Net"


@pytest.mark.parametrize(
    "calls",
    [
        "run(Net(), 1)\nrun(Other(), 1)\n",  # callers disagree
        "run(make(), 1)\n",  # one caller's value is unknown
        "run(*args)\n",  # a starred call hides the position
        "",  # nobody calls it in this file
    ],
)
def test_a_parameter_stays_unknown_unless_every_caller_agrees(calls: str) -> None:
    ctx = context(PASSED + calls)
    run = next(f for f in ctx.module.functions if f.name == "run")
    assert ctx.instance_type(_model_in(ctx, "run"), run) is None


def test_callers_are_not_read_before_the_walk_has_seen_every_call() -> None:
    text = textwrap.dedent(PASSED + "run(Net(), 1)\n")
    ctx = FileContext("x.py", text, ast.parse(text))
    walker = Walker(ctx, structure=True)
    seen: list[str | None] = []

    def ask(call: ast.Call) -> None:
        if isinstance(call.func, ast.Name) and call.func.id == "model" and ctx.function:
            seen.append(ctx.instance_type(call.func, ctx.function))

    walker.subscribe(ast.Call, ask)
    walker.walk()
    assert seen == [None]  # asked mid-walk: the call below had not been seen
    assert ctx.callers(next(f for f in ctx.module.functions if f.name == "run"))


@pytest.mark.parametrize(
    "name, family",
    [
        ("optimizer", torchapi.OPTIMIZER),
        ("optimizerD", torchapi.OPTIMIZER),
        ("g_opt", torchapi.OPTIMIZER),
        ("lr_scheduler", torchapi.SCHEDULER),
        ("scaler", torchapi.GRAD_SCALER),
        ("model", torchapi.MODULE),
        ("netG", torchapi.MODULE),
        ("criterion", torchapi.LOSS),
        ("loss_fn", torchapi.LOSS),
        ("train_loader", torchapi.DATALOADER),
    ],
)
def test_name_hints(name: str, family: str) -> None:
    assert torchapi.hinted_family(name) == family


@pytest.mark.parametrize("name", ["opt_level", "option", "env", "step", "modeling", "x"])
def test_names_that_hint_nothing(name: str) -> None:
    assert torchapi.hinted_family(name) is None


def test_a_known_class_outside_every_family_is_not_hinted() -> None:
    ctx = context("""
    import gym
    optimizer = gym.make("CartPole-v1")
    optimizer.step(0)
    """)
    assert ctx.family_of(last_call(ctx).func.value, None) is None


def test_canonical_names() -> None:
    assert torchapi.canonical("torch.optim.adam.Adam") == "torch.optim.Adam"
    assert torchapi.canonical("torch.nn.modules.linear.Linear") == "torch.nn.Linear"
    assert torchapi.canonical("torch.autograd.grad_mode.no_grad") == "torch.no_grad"
    assert (
        torchapi.canonical("torch.optim.lr_scheduler.StepLR") == "torch.optim.lr_scheduler.StepLR"
    )
    assert torchapi.in_family("torch.optim.lr_scheduler.StepLR", torchapi.SCHEDULER)
    assert not torchapi.in_family("torch.optim.lr_scheduler.StepLR", torchapi.OPTIMIZER)
    assert not torchapi.in_family("torch.nn.Parameter", torchapi.MODULE)


def test_canonical_spellings_keep_the_last_name() -> None:
    """``is_call_to`` rejects ``x.attr(...)`` by its attribute alone, which holds only
    while canonicalising never renames the last component."""
    spellings = [
        *torchapi._EXACT,
        *(prefix + "Thing" for prefix, _ in torchapi._SUBMODULE_PREFIXES),
        "torch.nn.modules.loss.MSELoss",
        "torch.optim.sgd.SGD",
        "torch.utils.data.dataloader.DataLoader",
    ]
    for name in spellings:
        assert torchapi.canonical(name).rpartition(".")[2] == name.rpartition(".")[2], name


def test_a_method_call_is_matched_through_imports_and_aliases_alike() -> None:
    ctx = context("""
    import torch.autograd as ag
    from torch import autograd
    bw = torch.autograd.backward
    import torch
    ag.backward(loss)
    autograd.backward(loss)
    bw(loss)
    torch.autograd.grad(loss)
    """)
    calls = [n for n in ast.walk(ctx.tree) if isinstance(n, ast.Call)]
    calls.sort(key=lambda c: c.lineno)
    matched = [ctx.is_call_to(c, "torch.autograd.backward", scope=None) for c in calls]
    assert matched == [True, True, True, False]


def test_local_call_resolution_for_functions_and_methods() -> None:
    ctx = context("""
    def helper():
        pass
    class A:
        def run(self):
            self.go()
            helper()
        def go(self):
            pass
    """)
    run = next(f for f in ctx.module.functions if f.name == "run")
    calls = [i.node for i in run.items if isinstance(i.node, ast.Call)]
    resolved = [ctx.resolve_local_call(c, run) for c in calls]
    assert [r.name if r else None for r in resolved] == ["go", "helper"]


def test_callers_of_a_function_in_file_order() -> None:
    ctx = context("""
    def helper(x):
        return x
    def main():
        helper(1)
        for _ in range(3):
            helper(2)
    class A:
        def run(self):
            return helper(3)
    helper(4)
    """)
    helper = ctx.function_index["helper"]
    calls = [(scope.name if scope else None, item.line) for scope, item in ctx.callers(helper)]
    assert calls == [(None, 11), ("main", 5), ("main", 7), ("run", 10)]
    assert ctx.callers(ctx.function_index["main"]) == []
    bodies = [(scope.name if scope else None, len(items)) for scope, items in ctx.module.bodies()]
    assert [name for name, _ in bodies] == [None, "helper", "main", "run"]


def test_columns_are_characters_on_non_ascii_lines() -> None:
    ctx = context('label = "é"; x = f(1)\n')
    loc = ctx.location(last_call(ctx))
    assert loc.column == 17 and loc.snippet == 'label = "é"; x = f(1)'


def test_every_parameter_free_layer_holds_no_parameters_on_the_installed_torch() -> None:
    """TD610 and the project index trust this list: a layer in it that held parameters
    would hide a real replacement. Each class is built with the arguments it needs."""
    nn = pytest.importorskip("torch.nn")
    needs = {
        "Unflatten": (1, (2, 2)),
        "Fold": (4, 2),
        "Unfold": (2,),
        "PixelShuffle": (2,),
        "PixelUnshuffle": (2,),
        "ChannelShuffle": (2,),
        "Threshold": (0.1, 0.0),
        "LocalResponseNorm": (2,),
        "CrossMapLRN2d": (3,),
        "FractionalMaxPool2d": (2,),
        "FractionalMaxPool3d": (2,),
        "LPPool1d": (2, 2),
        "LPPool2d": (2, 2),
        "LPPool3d": (2, 2),
    }
    checked = 0
    for qualified in sorted(torchapi.PARAMETER_FREE_LAYERS):
        name = qualified.rpartition(".")[2]
        if not hasattr(nn, name):
            continue  # newer than the installed torch
        cls = getattr(nn, name)
        if name.startswith(("MaxPool", "AvgPool", "MaxUnpool")) or name.startswith("Adaptive"):
            args: tuple[object, ...] = (2,)
        elif "Pad" in name:
            args = (1, 0.0) if name.startswith("ConstantPad") else (1,)
        else:
            args = needs.get(name, ())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # NLLLoss2d is deprecated
            layer = cls(*args, output_size=2) if "Fractional" in name else cls(*args)
        assert list(layer.parameters()) == [], qualified
        checked += 1
    assert checked >= 100


@pytest.mark.parametrize(
    ("name", "optimizer"),
    [
        # reformer-pytorch trains with fairseq's Adafactor: its steps are optimizer steps
        ("fairseq.optim.adafactor.Adafactor", True),
        ("lion_pytorch.Lion", True),
        ("came_pytorch.CAME", True),
        ("prodigyopt.Prodigy", True),
        ("deepspeed.ops.adam.FusedAdam", True),
        ("apex.optimizers.FusedLAMB", True),
        ("my_optimizers.adam.DecoupledAdamW", True),
        # a schedule of the same package, a helper function, and other classes are not
        ("transformers.optimization.AdafactorSchedule", False),
        (
            "fairseq.optim.lr_scheduler.inverse_square_root_schedule.InverseSquareRootSchedule",
            False,
        ),
        ("fairseq.optim.build_optimizer", False),
        ("gym.make", False),
        ("torch.nn.Adam", False),
    ],
)
def test_third_party_optimizer_classes(name: str, optimizer: bool) -> None:
    assert torchapi.in_family(name, torchapi.OPTIMIZER) is optimizer
