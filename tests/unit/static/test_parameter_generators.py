"""TD617 parameter-generator-exhausted."""

from __future__ import annotations

from tests.unit.static.helpers import assert_marked, lint_codes, lint_findings

HEADER = """
import torch
from torch import nn
"""


def test_generator_consumed_by_optimizer_then_clipping_is_flagged() -> None:
    assert_marked(
        HEADER
        + """
def train(loader):
    model = nn.Linear(2, 2)
    params = model.parameters()
    opt = torch.optim.SGD(params, lr=0.1)
    for x in loader:
        model(x).sum().backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)  # expect: TD617
        opt.step()
        opt.zero_grad()
""",
        "TD617",
    )


def test_two_groups_and_comprehensions_and_attributes_are_flagged() -> None:
    assert_marked(
        HEADER
        + """
def groups(model: nn.Module):
    trainable = filter(lambda p: p.requires_grad, model.parameters())
    opt = torch.optim.AdamW([{"params": trainable, "weight_decay": 0.1}])
    count = sum(p.numel() for p in trainable)  # expect: TD617

class Trainer:
    def __init__(self):
        self.model = nn.Linear(2, 2)
        self.params = self.model.parameters()
        self.opt = torch.optim.Adam(self.params)

    def clip(self):
        torch.nn.utils.clip_grad_norm_(self.params, 1.0)  # expect: TD617
""",
        "TD617",
    )


def test_consumer_in_a_loop_is_flagged_and_fix_stores_a_list() -> None:
    source = (
        HEADER
        + """
def clip_each_step(loader):
    model = nn.Linear(2, 2)
    params = model.parameters()
    for x in loader:
        torch.nn.utils.clip_grad_norm_(params, 1.0)
"""
    )
    found = lint_findings(source, "TD617")
    assert [(f.code, f.location.line) for f in found] == [("TD617", 9)]
    assert found[0].fix is not None
    assert found[0].fix.edits[0].replacement == "list(model.parameters())"


def test_lists_and_single_use_are_quiet() -> None:
    assert (
        lint_codes(
            HEADER
            + """
def train(loader):
    model = nn.Linear(2, 2)
    params = list(model.parameters())
    opt = torch.optim.SGD(params, lr=0.1)
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    once = model.parameters()
    opt2 = torch.optim.SGD(once, lr=0.1)
    again = model.parameters()
    print(again)
    stored = list(again)
    fresh = model.parameters()
    opt3 = torch.optim.Adam(fresh)
    fresh = model.parameters()
    opt4 = torch.optim.Adam(fresh)
""",
            "TD617",
        )
        == []
    )


def test_parameters_of_non_modules_and_rebuilt_in_the_loop_are_quiet() -> None:
    assert (
        lint_codes(
            HEADER
            + """
def f(group, loader):
    params = group.parameters()
    a = use(params)
    b = use(params)
    model = nn.Linear(2, 2)
    for x in loader:
        params = model.parameters()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
""",
            "TD617",
        )
        == []
    )


def test_named_parameters_consumed_once_per_function_are_quiet() -> None:
    assert (
        lint_codes(
            HEADER
            + """
def decay_groups(model: nn.Module):
    named = model.named_parameters()
    decay = [p for n, p in named if p.ndim >= 2]
    return torch.optim.AdamW(decay)

def other(model: nn.Module):
    named = model.named_parameters()
    return dict(named)
""",
            "TD617",
        )
        == []
    )


def test_stepping_a_generator_by_hand_is_quiet() -> None:
    assert (
        lint_codes(
            HEADER
            + """
def first_parameters(model: nn.Module):
    found = model.parameters()
    while True:
        param = next(found)
        if param.ndim > 1:
            yield param
""",
            "TD617",
        )
        == []
    )


def test_users_in_exclusive_branches_of_an_optimizer_factory_are_quiet() -> None:
    """``if name == "sgd": SGD(params) elif name == "momentum": SGD(params)``: one branch
    runs, so the generator is drained once. A use after the branches still counts."""
    assert_marked(
        HEADER
        + """
def create_optimizer(model, name, clip):
    parameters = model.parameters()
    if name == "sgd":
        optimizer = torch.optim.SGD(parameters, lr=0.1, nesterov=True, momentum=0.9)
    elif name == "momentum":
        optimizer = torch.optim.SGD(parameters, lr=0.1, momentum=0.9)
    else:
        if name == "adam":
            optimizer = torch.optim.Adam(parameters)
        else:
            optimizer = torch.optim.AdamW(parameters)
    return optimizer

def create_and_clip(model, name):
    parameters = model.parameters()
    if name == "sgd":
        optimizer = torch.optim.SGD(parameters, lr=0.1)
    else:
        optimizer = torch.optim.Adam(parameters)
    torch.nn.utils.clip_grad_norm_(parameters, 1.0)  # expect: TD617
    return optimizer
""",
        "TD617",
    )


def test_td617_uses_on_the_other_side_of_the_if_read_another_value() -> None:
    """pytorch-auto-drive: the generator is bound only when the config gives no groups;
    the else branch iterates and measures the config's list itself."""
    source = """
import torch

def get_optimizer(cfg, net):
    parameters = cfg.pop("parameters") if "parameters" in cfg else None
    if parameters is None:
        parameters = net.parameters()
    else:
        keys = [d["params"] for d in parameters]
        for i in range(len(parameters)):
            parameters[i] = {"params": [p for n, p in net.named_parameters() if keys[i] in n]}
    return torch.optim.SGD(parameters, lr=0.1)
"""
    assert lint_codes(source, "TD617") == []
    drained = source.replace(
        "        parameters = net.parameters()\n",
        "        parameters = net.parameters()\n        print(len(list(parameters)))\n",
    )
    assert [code for code, _ in lint_codes(drained, "TD617")] == ["TD617"]


OPTIMIZER_CHOICE = """
import torch


def build(model, args):
    params_to_optimize = model.parameters()
    if not (args.optimizer.lower() == "prodigy" or args.optimizer.lower() == "adamw"):
        args.optimizer = "adamw"
    if args.optimizer.lower() == "adamw":
        optimizer = torch.optim.AdamW(params_to_optimize, lr=args.lr)
    if args.optimizer.lower() == {second}:
        optimizer = torch.optim.SGD(params_to_optimize, lr=args.lr){mark}
    return optimizer
"""


def test_td617_two_ifs_on_different_values_of_one_option_run_one_consumer() -> None:
    """The diffusers training scripts (Open-Sora-Plan): one `if` per optimizer name, each
    handing the same generator on; only one of them runs."""
    quiet = OPTIMIZER_CHOICE.format(second='"prodigy"', mark="")
    assert_marked(quiet, "TD617")
    # the same test twice: both consumers run, the second gets nothing
    same = OPTIMIZER_CHOICE.format(second='"adamw"', mark="  # expect: TD617")
    assert_marked(same, "TD617")


FREEZE_THEN_GROUPS = """
import torch


def build_optimizer(model, head_ids, args):
    base = filter(lambda p: id(p) not in head_ids, model.parameters())
    head = filter(lambda p: id(p) in head_ids, model.parameters())
    if args.base_lr_scale == 0:
        for param in base:
{body}
    return torch.optim.Adam({mark}
        [{{"params": base, "lr": 0.0}}, {{"params": head, "lr": args.lr}}], lr=args.lr
    )
"""


def test_td617_a_loop_that_only_freezes_what_it_drains_loses_nothing() -> None:
    """grover's build_optimizer: the base layers are frozen by the loop that drains their
    generator; the optimizer group left empty would have held only frozen parameters."""
    for body in (
        "            param.requires_grad = False",
        "            param.requires_grad_(False)",
        "            param.requires_grad_(requires_grad=False)\n"
        "            param.requires_grad = False",
    ):
        assert_marked(FREEZE_THEN_GROUPS.format(body=body, mark=""), "TD617")


def test_td617_a_loop_that_unfreezes_or_reads_the_parameters_still_drains() -> None:
    """An unfreeze leaves trainable parameters out of the group; a loop that prints,
    counts or initialises them drains the generator for nothing."""
    for body in (
        "            param.requires_grad = True",
        "            param.requires_grad_()",
        "            print(param.shape)",
        "            param.requires_grad = False\n            torch.nn.init.zeros_(param)",
        "            param.requires_grad = False\n            args.frozen += 1",
    ):
        assert_marked(FREEZE_THEN_GROUPS.format(body=body, mark="  # expect: TD617"), "TD617")


def test_td617_a_freeze_loop_after_the_optimizer_freezes_nothing() -> None:
    """The optimizer drains the generator first: the later freeze loop gets no parameter,
    and the layers it meant to freeze keep training. A count by sum() drains as well."""
    assert_marked(
        HEADER
        + """
def freeze_after(model: nn.Module):
    params = model.parameters()
    optimizer = torch.optim.Adam(params, lr=0.1)
    for p in params:  # expect: TD617
        p.requires_grad = False
    return optimizer

def count_first(model: nn.Module):
    params = model.parameters()
    print(sum(p.numel() for p in params))
    return torch.optim.Adam(params, lr=0.1)  # expect: TD617

def freeze_then_two_users(model: nn.Module, frozen: bool):
    params = model.parameters()
    if frozen:
        for p in params:
            p.requires_grad = False
    optimizer = torch.optim.Adam(params, lr=0.1)
    torch.nn.utils.clip_grad_norm_(params, 1.0)  # expect: TD617
    return optimizer
""",
        "TD617",
    )
