"""TD814 clip-norm-from-local-shard: torch's clip_grad_norm_ over a sharded FSDP1 model."""

from __future__ import annotations

from tests.unit.static.helpers import assert_marked, lint_codes, lint_findings
from torchdoctor.findings import Applicability

HEADER = """
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, ShardingStrategy
"""


def _src(body: str) -> str:
    return HEADER + body


# --- flagged ------------------------------------------------------------------------------


def test_plain_loop_over_the_wrap_is_flagged() -> None:
    assert_marked(
        _src("""
def train(loader):
    model = FSDP(nn.Linear(4, 2), device_id=torch.device("cpu"))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        optimizer.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # expect: TD814
        optimizer.step()
"""),
        "TD814",
    )


def test_trainer_attribute_and_filtered_list_are_flagged() -> None:
    assert_marked(
        _src("""
class Trainer:
    def __init__(self, net):
        self.model = FSDP(net, use_orig_params=True)

    def clip(self):
        params = [p for p in self.model.parameters() if p.requires_grad]
        return nn.utils.clip_grad_norm_(params, max_norm=1.0)  # expect: TD814
"""),
        "TD814",
    )


def test_helper_called_with_a_sharded_model_is_flagged() -> None:
    assert_marked(
        _src("""
from torch.nn.utils import clip_grad_norm_

def step(model, optimizer, loss):
    loss.backward()
    clip_grad_norm_(model.parameters(), 1.0)  # expect: TD814
    optimizer.step()

def main(net, optimizer, loss):
    model = FSDP(net, sharding_strategy=ShardingStrategy.SHARD_GRAD_OP)
    step(model, optimizer, loss)
"""),
        "TD814",
    )


def test_strategy_bound_to_a_name_and_module_level_code_are_flagged() -> None:
    assert_marked(
        _src("""
strategy = ShardingStrategy.HYBRID_SHARD
model = FSDP(nn.Linear(4, 2), sharding_strategy=strategy)
torch.nn.utils.clip_grad.clip_grad_norm_(model.parameters(), 0.5)  # expect: TD814
"""),
        "TD814",
    )


def test_finding_offers_the_method_as_an_unsafe_fix() -> None:
    found = lint_findings(
        _src("""
model = FSDP(nn.Linear(4, 2))
norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0, norm_type=2.0)
"""),
        "TD814",
    )
    assert len(found) == 1
    fix = found[0].fix
    assert fix is not None and fix.applicability is Applicability.UNSAFE
    assert fix.edits[0].replacement == "model.clip_grad_norm_(max_norm=1.0, norm_type=2.0)"
    assert "model.clip_grad_norm_(max_norm=1.0, norm_type=2.0)" in found[0].fix_hint


def test_inner_module_after_the_wrap_is_flagged() -> None:
    assert_marked(
        _src("""
def train(net, loss):
    model = FSDP(net, use_orig_params=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)  # expect: TD814

class Trainer:
    def __init__(self, net):
        self.net = net
        self.model = FSDP(self.net)

    def step(self, loss):
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.net.parameters(), 1.0)  # expect: TD814
"""),
        "TD814",
    )


def test_fsdp_wrap_on_one_branch_is_flagged() -> None:
    assert_marked(
        _src("""
from torch.nn.parallel import DistributedDataParallel as DDP

def train(args, model, loss, optimizer):
    if args.fsdp:
        model = FSDP(model, use_orig_params=True)
    else:
        model = DDP(model)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)  # expect: TD814
    optimizer.step()
"""),
        "TD814",
    )


# --- quiet --------------------------------------------------------------------------------


def test_fsdp_own_method_is_quiet() -> None:
    assert not lint_codes(
        _src("""
model = FSDP(nn.Linear(4, 2))
model.clip_grad_norm_(1.0)
"""),
        "TD814",
    )


def test_ddp_model_is_quiet() -> None:
    assert not lint_codes(
        _src("""
from torch.nn.parallel import DistributedDataParallel as DDP
model = DDP(nn.Linear(4, 2))
torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
"""),
        "TD814",
    )


def test_fsdp2_fully_shard_is_quiet() -> None:
    assert not lint_codes(
        _src("""
from torch.distributed.fsdp import fully_shard
model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2))
for layer in model:
    fully_shard(layer)
fully_shard(model)
torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
"""),
        "TD814",
    )


def test_tensor_parallel_is_quiet() -> None:
    assert not lint_codes(
        _src("""
from torch.distributed.tensor.parallel import ColwiseParallel, parallelize_module
model = parallelize_module(nn.Linear(4, 2), mesh, {"": ColwiseParallel()})
torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
"""),
        "TD814",
    )


def test_no_shard_and_unknown_strategies_are_quiet() -> None:
    assert not lint_codes(
        _src("""
def run(args, net, options):
    a = FSDP(net, sharding_strategy=ShardingStrategy.NO_SHARD)
    torch.nn.utils.clip_grad_norm_(a.parameters(), 1.0)
    b = FSDP(net, sharding_strategy=args.strategy)
    torch.nn.utils.clip_grad_norm_(b.parameters(), 1.0)
    c = FSDP(net, **options)
    torch.nn.utils.clip_grad_norm_(c.parameters(), 1.0)
"""),
        "TD814",
    )


def test_value_clipping_is_quiet() -> None:
    assert not lint_codes(
        _src("""
model = FSDP(nn.Linear(4, 2))
torch.nn.utils.clip_grad_value_(model.parameters(), 1.0)
"""),
        "TD814",
    )


def test_helper_only_called_with_unsharded_models_is_quiet() -> None:
    assert not lint_codes(
        _src("""
def clip(model):
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)

def main(net):
    clip(net)
    clip(FSDP(net, sharding_strategy=ShardingStrategy.NO_SHARD))
"""),
        "TD814",
    )


def test_branches_that_never_shard_are_quiet() -> None:
    assert not lint_codes(
        _src("""
from torch.nn.parallel import DistributedDataParallel as DDP

def train(args, model, loss):
    if args.ddp:
        model = DDP(model)
    else:
        model = FSDP(model, sharding_strategy=ShardingStrategy.NO_SHARD)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)

def evaluate_copy(net, loss):
    model = FSDP(net)
    model = build_plain_copy(net)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
"""),
        "TD814",
    )


def test_inner_module_clipped_before_the_wrap_is_quiet() -> None:
    assert not lint_codes(
        _src("""
def pretrain_then_shard(net, loss):
    loss.backward()
    torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
    model = FSDP(net)
    return model
"""),
        "TD814",
    )


def test_a_local_function_named_like_torchs_is_quiet() -> None:
    assert not lint_codes(
        _src("""
def clip_grad_norm_(parameters, max_norm):
    return max_norm

model = FSDP(nn.Linear(4, 2))
clip_grad_norm_(model.parameters(), 1.0)
"""),
        "TD814",
    )
