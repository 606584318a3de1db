"""TD806 loader-without-distributed-sampler, TD807 forward-bypasses-ddp-wrapper, TD808
parameters-cast-after-ddp-wrap."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.static.helpers import assert_marked, lint_codes, lint_findings
from torchdoctor.static import LintConfig, lint

HEADER = """
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, IterableDataset
"""

LOOP = """
    opt = torch.optim.SGD(ddp_model.parameters(), lr=0.1)
    for x, y in loader:
        loss = (ddp_model(x) - y).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
"""
LOOPS = LOOP + LOOP.replace("in loader", "in given")


def test_training_loader_without_sampler_is_flagged() -> None:
    assert_marked(
        HEADER
        + """
def main(rank):
    dist.init_process_group("nccl")
    dataset = load_dataset("train")
    ddp_model = DDP(nn.Linear(2, 2).to(rank), device_ids=[rank])
    loader = DataLoader(dataset, batch_size=8, shuffle=True)  # expect: TD806
    train_loader = DataLoader(dataset, batch_size=8)  # expect: TD806
"""
        + LOOP,
        "TD806",
    )


def test_loaders_with_samplers_or_hidden_arguments_are_quiet() -> None:
    assert (
        lint_codes(
            HEADER
            + """
class Stream(IterableDataset):
    def __iter__(self):
        yield 1

def main(dataset, kwargs, rank):
    dist.init_process_group("nccl")
    ddp_model = DDP(nn.Linear(2, 2))
    loader = DataLoader(dataset, sampler=DistributedSampler(dataset))
    other = DataLoader(dataset, **kwargs)
    given = DataLoader(dataset, batch_size=8, shuffle=True)
    val_loader = DataLoader(dataset, batch_size=8)
    stream = Stream()
    train_stream = DataLoader(stream, batch_size=8)
    shard = make_shard(rank=rank)
    train_shard = DataLoader(shard, batch_size=8)
"""
            + LOOPS,
            "TD806",
        )
        == []
    )


def test_a_loader_with_automatic_batching_off_reads_a_pipeline_that_shards_itself() -> None:
    """WeNet: ``DataLoader(dataset, batch_size=None)`` over a dataset a project helper
    builds; the dataset yields whole batches and splits the data by rank and worker
    itself, where no sampler could. A batch size given, the same loader is flagged."""
    assert_marked(
        HEADER
        + """
def main(rank, args):
    dist.init_process_group("nccl")
    dataset = init_dataset(args.train_data, partition=True)
    ddp_model = DDP(nn.Linear(2, 2).to(rank), device_ids=[rank])
    loader = DataLoader(dataset, batch_size=None, num_workers=4)
    train_loader = DataLoader(dataset, batch_size=16)  # expect: TD806
"""
        + LOOP,
        "TD806",
    )


def test_loaders_without_ddp_are_quiet() -> None:
    assert (
        lint_codes(
            """
import torch
from torch import nn
from torch.utils.data import DataLoader

def main(dataset):
    model = nn.Linear(2, 2)
    train_loader = DataLoader(dataset, batch_size=8, shuffle=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in train_loader:
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
""",
            "TD806",
        )
        == []
    )


def test_forward_through_module_or_unwrapped_model_is_flagged() -> None:
    assert_marked(
        HEADER
        + """
def main(loader):
    model = nn.Linear(2, 2)
    ddp_model = DDP(model)
    opt = torch.optim.SGD(ddp_model.parameters(), lr=0.1)
    for x, y in loader:
        loss = (ddp_model.module(x) - y).pow(2).mean()  # expect: TD807
        loss = loss + model(x).abs().mean()  # expect: TD807
        opt.zero_grad()
        loss.backward()
        opt.step()
""",
        "TD807",
    )


def test_forward_through_the_wrapper_or_for_evaluation_is_quiet() -> None:
    assert (
        lint_codes(
            HEADER
            + """
def main(loader):
    model = nn.Linear(2, 2)
    early = model(torch.zeros(1, 2))
    ddp_model = DDP(model)
    opt = torch.optim.SGD(ddp_model.parameters(), lr=0.1)
    for x, y in loader:
        loss = (ddp_model(x) - y).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            check = ddp_model.module(x)
    torch.save(ddp_model.module.state_dict(), "model.pt")

def same_name(model, loader):
    model = DDP(model)
    for x, y in loader:
        model(x).sum().backward()
""",
            "TD807",
        )
        == []
    )


def test_cast_after_wrap_is_flagged() -> None:
    assert_marked(
        HEADER
        + """
def main(loader):
    model = nn.Linear(2, 2)
    ddp_model = DDP(model)
    model.half()  # expect: TD808
    ddp_model.module.to(torch.bfloat16)  # expect: TD808
    ddp_model.to(dtype=torch.float64)  # expect: TD808
"""
        + LOOP,
        "TD808",
    )


def test_cast_before_wrap_moves_and_casts_after_training_are_quiet() -> None:
    assert (
        lint_codes(
            HEADER
            + """
def main(loader, device):
    model = nn.Linear(2, 2).half()
    ddp_model = DDP(model.to(device))
    ddp_model.to(device)
"""
            + LOOP
            + """
    ddp_model.module.half()
    torch.save(ddp_model.module.state_dict(), "half.pt")
""",
            "TD808",
        )
        == []
    )


def test_a_wrapper_wrapped_again_is_quiet() -> None:
    assert (
        lint_codes(
            HEADER
            + """
def main(model, x):
    model = DDP(model)
    static = DDP(model, static_graph=True)
    for _ in range(3):
        model(x).sum().backward()
        static(x).sum().backward()
""",
            "TD807",
        )
        == []
    )


def test_regulariser_helper_calling_the_unwrapped_model_is_flagged() -> None:
    assert_marked(
        HEADER
        + """
model = nn.Linear(2, 2)

def consistency(x):
    return model(x + 0.1).pow(2).mean()  # expect: TD807

def evaluate(x):
    with torch.no_grad():
        return model(x)

ddp_model = DDP(model)
opt = torch.optim.SGD(ddp_model.parameters(), lr=0.1)
for x, y in loader:
    loss = (ddp_model(x) - y).pow(2).mean() + consistency(x)
    opt.zero_grad()
    loss.backward()
    opt.step()
    score = evaluate(x)
""",
        "TD807",
    )


def test_helpers_called_before_the_wrap_or_through_it_are_quiet() -> None:
    assert (
        lint_codes(
            HEADER
            + """
model = nn.Linear(2, 2)

def warmup(x):
    return model(x).sum()

def consistency(net, x):
    return net(x).pow(2).mean()

warmup(torch.zeros(1, 2)).backward()
ddp_model = DDP(model)
opt = torch.optim.SGD(ddp_model.parameters(), lr=0.1)
for x, y in loader:
    loss = (ddp_model(x) - y).pow(2).mean() + consistency(ddp_model, x)
    opt.zero_grad()
    loss.backward()
    opt.step()
""",
            "TD807",
        )
        == []
    )


def test_loader_passed_to_a_training_function_is_flagged() -> None:
    assert_marked(
        HEADER
        + """
def train(model, device, loader, optimizer):
    for x, y in loader:
        optimizer.zero_grad()
        (model(x) - y).pow(2).mean().backward()
        optimizer.step()

def main(rank):
    dist.init_process_group("nccl")
    dataset = load_dataset()
    data = DataLoader(dataset, batch_size=8, shuffle=True)  # expect: TD806
    evaluation = DataLoader(dataset, batch_size=8)
    model = DDP(nn.Linear(2, 2))
    train(model, rank, data, torch.optim.SGD(model.parameters(), lr=0.1))
    check(model, evaluation)
""",
        "TD806",
    )


METHOD_BYPASS = """
import torch
from torch.nn.parallel import DistributedDataParallel as DDP
head = DDP(Head())
optimizer = torch.optim.SGD(head.parameters(), lr=0.1)
for x, y in loader:
    out = head.module.{method}(x){mark}
    loss = {loss}
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


@pytest.mark.parametrize(
    "method, loss, flagged",
    [
        ("predict", "torch.nn.functional.mse_loss(out, y)", True),
        ("predict", "(out - y).abs().mean()", True),
        ("describe", "torch.nn.functional.mse_loss(head(x), y)", False),  # not what trains
    ],
)
def test_td807_a_method_of_the_wrapped_module_feeding_the_loss(
    method: str, loss: str, flagged: bool
) -> None:
    mark = "  # expect: TD807" if flagged else ""
    assert_marked(METHOD_BYPASS.format(method=method, loss=loss, mark=mark), "TD807")


AFTER_THE_WRAPPER = """
import torch
from torch.nn.parallel import DistributedDataParallel as DDP
model = DDP(Captioner())
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in loader:
{before}    cls_loss = model.module.bce_loss(score, y){mark}
    loss = cls_loss.mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


@pytest.mark.parametrize(
    "before, flagged",
    [
        ("    score = model(x)\n", False),
        ("    score = model.forward(x)\n", False),
        ("    with torch.no_grad():\n        score = model(x)\n", True),
        ("    score = x\n", True),
    ],
)
def test_td807_a_part_of_the_wrapped_module_run_after_the_wrapper_in_the_same_pass(
    before: str, flagged: bool
) -> None:
    """densecap: ``model.module.bce_loss(score, target)`` on what the wrapper's forward
    gave in the same iteration. DDP prepared its reduction in that forward, and its
    hooks on every parameter all-reduce what the part's parameters get too. Without a
    forward through the wrapper first (or one under no_grad) the part still bypasses."""
    mark = "  # expect: TD807" if flagged else ""
    assert_marked(AFTER_THE_WRAPPER.format(before=before, mark=mark), "TD807")


CAST_IN_HELPER = """
import torch
from torch.nn.parallel import DistributedDataParallel as DDP
def save_half(model):
    model.{cast}{mark}
    torch.save(model.module.state_dict(), "m.pt")
ddp_model = DDP(Net())
optimizer = torch.optim.SGD(ddp_model.parameters(), lr=0.1)
for step, (x, y) in enumerate(loader):
    loss = (ddp_model(x) - y).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 10 == 0:
        save_half({passed})
"""


@pytest.mark.parametrize(
    "cast, passed, flagged",
    [
        ("half()", "ddp_model", True),  # training goes on at the loop's next pass
        ("to(torch.bfloat16)", "ddp_model", True),
        ("half()", "copy_of_model", False),  # not the wrapper
        ("eval()", "ddp_model", False),  # not a cast
    ],
)
def test_td808_a_cast_in_a_helper_handed_the_wrapper(cast: str, passed: str, flagged: bool) -> None:
    mark = "  # expect: TD808" if flagged else ""
    source = CAST_IN_HELPER.format(cast=cast, passed=passed, mark=mark)
    assert_marked(source, "TD808")


EVALUATE_THEN_TRAIN = """
import torch
from torch.nn.parallel import DistributedDataParallel as DDP
def validate(model, half):
    if half:
        model.half()
    return model(torch.randn(2, 4))
def train_one_epoch(model, optimizer, loader):
    for x, y in loader:
        loss = (model(x) - y).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
def main(model, args, optimizer, loader):
    model = DDP(model)
    if args.evaluate:
        validate(model, args.use_half)
        return
    for epoch in range(args.epochs):
        train_one_epoch(model, optimizer, loader)
{in_loop}
"""


@pytest.mark.parametrize(
    "in_loop, called_at",
    [
        ("        validate(model, args.use_half)", 21),  # the call training follows
        ("", None),  # only the evaluation that returns: no training after it
        ("        validate(model, False)", None),  # the loop's call never casts
    ],
)
def test_td808_names_the_call_that_training_follows(in_loop: str, called_at: int | None) -> None:
    """LaViLa: the helper casting the wrapper is called under ``if args.evaluate:`` just
    before ``return``, and again in the epoch loop. Only the loop's call is followed by
    training, so that is the one the message names; a loop call whose constant argument
    skips the cast casts nothing."""
    found = lint_findings(EVALUATE_THEN_TRAIN.format(in_loop=in_loop), "TD808")
    if called_at is None:
        assert found == []
    else:
        assert [f.location.line for f in found] == [6]
        assert f"called at line {called_at})" in found[0].message


def test_td806_a_loader_in_the_else_of_the_test_that_guards_every_wrap_is_single_process() -> None:
    """NeuralRecon: `if cfg.DISTRIBUTED:` builds a DistributedSampler loader and, later,
    the DDP wrap; the plain loader in the `else` feeds the single-process run."""
    source = """
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

def main(cfg, model):
    dataset = torch.utils.data.TensorDataset(torch.randn(8, 2), torch.randn(8, 1))
    if cfg.DISTRIBUTED:
        dist.init_process_group("nccl")
    if cfg.DISTRIBUTED:
        train_loader = DataLoader(dataset, batch_size=4, sampler=DistributedSampler(dataset))
    else:
        train_loader = DataLoader(dataset, batch_size=4, shuffle=True)
    if cfg.DISTRIBUTED:
        model = DistributedDataParallel(model)
    else:
        model = torch.nn.DataParallel(model)
    for x, y in train_loader:
        torch.nn.functional.mse_loss(model(x), y).backward()
"""
    assert lint_codes(source, "TD806") == []
    unguarded = source.replace(
        "    if cfg.DISTRIBUTED:\n        model = DistributedDataParallel(model)\n"
        "    else:\n        model = torch.nn.DataParallel(model)\n",
        "    model = DistributedDataParallel(model)\n",
    )
    assert [code for code, _ in lint_codes(unguarded, "TD806")] == ["TD806"]


_WRAP_WITHOUT_ELSE = """
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

def main(parallel, model):
    dataset = torch.utils.data.TensorDataset(torch.randn(8, 2), torch.randn(8, 1))
    if parallel == True:
        dist.init_process_group("nccl")
        model = DistributedDataParallel(model)
{loaders}
    for x, y in train_loader:
        torch.nn.functional.mse_loss(model(x), y).backward()
"""


@pytest.mark.parametrize(
    ("loaders", "flagged"),
    [
        # TransFuser: the wrap's `if` has no `else`; the loaders' `if` on the same test does
        (
            "    if parallel == True:\n"
            "        train_loader = DataLoader(dataset, sampler=DistributedSampler(dataset))\n"
            "    else:\n"
            "        train_loader = DataLoader(dataset, shuffle=True)",
            False,
        ),
        # the single-process loader in the body of `if not T:`
        (
            "    train_loader = DataLoader(dataset, sampler=DistributedSampler(dataset))\n"
            "    if not parallel == True:\n"
            "        train_loader = DataLoader(dataset, shuffle=True)",
            False,
        ),
        # the plain loader on the same side as the wrap: every rank reads everything
        (
            "    if parallel == True:\n"
            "        train_loader = DataLoader(dataset, shuffle=True)\n"
            "    else:\n"
            "        train_loader = DataLoader(dataset, shuffle=False)",
            True,
        ),
        # a different test: a DDP run can take the plain loader
        (
            "    if parallel == True and False:\n"
            "        train_loader = DataLoader(dataset, sampler=DistributedSampler(dataset))\n"
            "    else:\n"
            "        train_loader = DataLoader(dataset, shuffle=True)",
            True,
        ),
    ],
)
def test_td806_a_wrap_under_an_if_without_else_and_a_loader_where_its_test_fails(
    loaders: str, flagged: bool
) -> None:
    found = lint_codes(_WRAP_WITHOUT_ELSE.format(loaders=loaders), "TD806")
    assert bool(found) is flagged, found


_STREAMS = """
import torch.distributed as dist
from torch.utils.data import {base}


class StreamingDataset({base}):
    def __init__(self, elements):
        super().__init__()
        self.elements = elements

    def __iter__(self):
        rank, replicas = dist.get_rank(), dist.get_world_size()
        for i, element in enumerate(self.elements):
            if i % replicas == rank:
                yield element
"""
_STREAMING_TRAINER = """
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader

from utils.util import StreamingDataset


def train(args, model, elements, optimizer):
    dist.init_process_group("nccl")
    model = DistributedDataParallel(model.cuda(), device_ids=[args.local_rank])
    train_dataloader = DataLoader(StreamingDataset(elements), batch_size=32)
    for batch in train_dataloader:
        optimizer.zero_grad()
        model(batch).sum().backward()
        optimizer.step()
"""


@pytest.mark.parametrize(("base", "flagged"), [("IterableDataset", False), ("Dataset", True)])
def test_an_iterable_dataset_of_another_module_needs_no_sampler(
    tmp_path: Path, base: str, flagged: bool
) -> None:
    """ANCE's StreamingDataset (utils/util.py) is an IterableDataset that keeps every
    world_size-th element by rank: a sampler does not apply to it. A map-style dataset of
    the same module still needs one."""
    (tmp_path / "utils").mkdir()
    (tmp_path / "utils" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "utils" / "util.py").write_text(_STREAMS.format(base=base), "utf-8")
    (tmp_path / "run_ann.py").write_text(_STREAMING_TRAINER, encoding="utf-8")
    report = lint(tmp_path, config=LintConfig(select=("TD806", "TD001")), jobs=1)
    assert [(f.code, f.location.line) for f in report.findings] == (
        [("TD806", 13)] if flagged else []
    )
