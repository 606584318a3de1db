"""TD815 local-loss-logged-as-global: rank 0 logs its own loss as the job's training loss."""

from __future__ import annotations

from tests.unit.static.helpers import assert_marked, lint_codes, lint_findings
from torchdoctor.findings import Severity

HEADER = """
import logging
import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

logger = logging.getLogger(__name__)
"""


def _src(body: str) -> str:
    return HEADER + body


# --- flagged ------------------------------------------------------------------------------


def test_plain_loop_printing_the_loss_on_rank_zero_is_flagged() -> None:
    assert_marked(
        _src("""
def train(rank, loader, net):
    model = DDP(net)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step, (x, y) in enumerate(loader):
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        if rank == 0 and step % 10 == 0:
            print(f"step {step}: loss {loss.item():.4f}")  # expect: TD815
"""),
        "TD815",
    )


def test_module_level_accumulation_script_is_flagged_as_info() -> None:
    source = _src("""
ddp_rank = int(os.environ["RANK"])
master_process = ddp_rank == 0
model = DDP(net, device_ids=[ddp_rank])
scaler = torch.amp.GradScaler()
while True:
    for micro_step in range(accumulation):
        loss = model(x, y) / accumulation
        scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    if it % 10 == 0 and master_process:
        lossf = loss.item() * accumulation
        print(f"iter {it}: loss {lossf:.4f}")  # expect: TD815
    it += 1
""")
    assert_marked(source, "TD815")
    (found,) = lint_findings(source, "TD815")
    assert found.severity is Severity.INFO
    assert "`lossf`" in found.message and "all_reduce" in found.fix_hint


def test_running_sum_logged_after_the_loop_is_flagged() -> None:
    assert_marked(
        _src("""
def train_epoch(model, loader, optimizer):
    running = 0.0
    for x, y in loader:
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        running += loss.item()
    if dist.get_rank() == 0:
        logger.info("epoch loss %.4f", running / len(loader))  # expect: TD815

def main(net, loader):
    model = DDP(net)
    train_epoch(model, loader, torch.optim.SGD(model.parameters(), lr=0.1))
"""),
        "TD815",
    )


def test_trainer_step_returning_the_loss_is_flagged() -> None:
    assert_marked(
        _src("""
import wandb

class Trainer:
    def __init__(self, net, rank):
        self.model = DDP(net)
        self.optimizer = torch.optim.AdamW(self.model.parameters())
        self.is_main_process = rank == 0

    def train_step(self, x, y):
        self.optimizer.zero_grad()
        loss = nn.functional.mse_loss(self.model(x), y)
        loss.backward()
        self.optimizer.step()
        return loss.item(), x.shape[0]

    def fit(self, loader):
        losses = []
        for x, y in loader:
            value, count = self.train_step(x, y)
            losses.append(value)
        if self.is_main_process:
            wandb.log({"train/loss": np.mean(losses)})  # expect: TD815
"""),
        "TD815",
    )


def test_logging_helper_called_under_the_guard_is_flagged() -> None:
    assert_marked(
        _src("""
class Trainer:
    def __init__(self, net, writer, rank):
        self.model = DDP(net)
        self.writer = writer
        self.rank = rank

    def log_step(self, step, value):
        self.writer.add_scalar("train/loss", value, step)

    def fit(self, loader, optimizer):
        for step, (x, y) in enumerate(loader):
            loss = nn.functional.mse_loss(self.model(x), y)
            loss.backward()
            optimizer.step()
            if self.rank == 0:
                self.log_step(step, loss.item())  # expect: TD815
"""),
        "TD815",
    )


def test_tensor_accumulator_logged_without_reduction_is_flagged() -> None:
    assert_marked(
        _src("""
def train(rank, loader, net, optimizer):
    model = DDP(net)
    running = torch.zeros(2)
    for x, y in loader:
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        running += torch.stack([loss.detach() * len(y), torch.tensor(float(len(y)))])
    if rank == 0:
        print(f"loss {running[0] / running[1]:.4f}")  # expect: TD815
"""),
        "TD815",
    )


def test_early_return_off_rank_zero_and_rank_zero_only_helper_are_flagged() -> None:
    assert_marked(
        _src("""
from lightning.pytorch.utilities import rank_zero_only

@rank_zero_only
def report(step, value):
    print(f"step {step}: loss {value:.4f}")

def log_epoch(rank, model, loader, optimizer):
    total = 0.0
    for x, y in loader:
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        total += loss.item()
        report(0, loss.item())  # expect: TD815
    if rank != 0:
        return
    logger.info("epoch loss %.4f", total / len(loader))  # expect: TD815

def main(net, loader, optimizer):
    log_epoch(0, DDP(net), loader, optimizer)
"""),
        "TD815",
    )


def test_reducing_only_the_accuracy_is_flagged() -> None:
    assert_marked(
        _src("""
def train(rank, loader, net, optimizer):
    model = DDP(net)
    correct = torch.zeros(())
    for x, y in loader:
        logits = model(x)
        loss = nn.functional.cross_entropy(logits, y)
        loss.backward()
        optimizer.step()
        correct += (logits.argmax(1) == y).sum()
    dist.all_reduce(correct)
    if rank == 0:
        print(f"accuracy {correct.item()} loss {loss.item():.4f}")  # expect: TD815
"""),
        "TD815",
    )


# --- quiet --------------------------------------------------------------------------------


def test_all_reduced_loss_is_quiet() -> None:
    assert not lint_codes(
        _src("""
def train(rank, loader, net):
    model = DDP(net)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step, (x, y) in enumerate(loader):
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        if rank == 0:
            print(f"step {step}: loss {mean.item() / dist.get_world_size():.4f}")
"""),
        "TD815",
    )


def test_reduction_in_a_helper_is_quiet() -> None:
    assert not lint_codes(
        _src("""
def average_over_ranks(value):
    tensor = torch.tensor(value)
    dist.all_reduce(tensor)
    return tensor.item() / dist.get_world_size()

def train(rank, loader, net, optimizer):
    model = DDP(net)
    total = 0.0
    for x, y in loader:
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        total += loss.item()
    total = average_over_ranks(total)
    if rank == 0:
        print(f"loss {total:.4f}")
"""),
        "TD815",
    )


def test_reduction_three_helpers_deep_is_quiet() -> None:
    # Helpers are followed as deep as every analysis follows them (MAX_CALL_DEPTH).
    assert not lint_codes(
        _src("""
def combine(value):
    tensor = torch.tensor(value)
    dist.all_reduce(tensor)
    return tensor.item() / dist.get_world_size()

def summarise(value):
    return combine(value)

def finish_epoch(value):
    return summarise(value)

def train(rank, loader, net, optimizer):
    model = DDP(net)
    total = 0.0
    for x, y in loader:
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        total += loss.item()
    total = finish_epoch(total)
    if rank == 0:
        print(f"loss {total:.4f}")
"""),
        "TD815",
    )


def test_reduction_of_a_tensor_filled_from_the_loss_is_quiet() -> None:
    assert not lint_codes(
        _src("""
def train(rank, loader, net, optimizer):
    model = DDP(net)
    stats = torch.zeros(2)
    for x, y in loader:
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        stats[0] += loss.item() * len(y)
        stats[1] += len(y)
    dist.all_reduce(stats, op=dist.ReduceOp.SUM)
    if rank == 0:
        print(f"loss {stats[0] / stats[1]:.4f}")
"""),
        "TD815",
    )


def test_gather_and_synchronise_helpers_are_quiet() -> None:
    assert not lint_codes(
        _src("""
def train(rank, loader, net, optimizer, accelerator, meter):
    model = DDP(net)
    for x, y in loader:
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        losses = accelerator.gather(loss.detach())
        meter.update(loss.item())
    meter.synchronize_between_processes()
    if rank == 0:
        print(loss.item(), losses.mean())
"""),
        "TD815",
    )


def test_script_without_ddp_is_quiet() -> None:
    assert not lint_codes(
        """
import torch
from torch import nn

def train(rank, loader, model, optimizer):
    for x, y in loader:
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        if rank == 0:
            print(loss.item())
""",
        "TD815",
    )


def test_logging_other_values_on_rank_zero_is_quiet() -> None:
    assert not lint_codes(
        _src("""
def train(rank, loader, net, optimizer):
    model = DDP(net)
    losses = []
    for step, (x, y) in enumerate(loader):
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if rank == 0:
            print(f"step {step} lr {optimizer.param_groups[0]['lr']}")
            logger.info("%d batches so far", len(losses))
"""),
        "TD815",
    )


def test_every_rank_printing_its_own_loss_is_quiet() -> None:
    assert not lint_codes(
        _src("""
def train(rank, loader, net, optimizer):
    model = DDP(net)
    for x, y in loader:
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        print(f"[rank {rank}] loss {loss.item():.4f}")
"""),
        "TD815",
    )


def test_evaluation_loss_without_backward_is_quiet() -> None:
    assert not lint_codes(
        _src("""
@torch.no_grad()
def evaluate(model, loader):
    return sum(nn.functional.mse_loss(model(x), y).item() for x, y in loader)

def train(rank, loader, net, optimizer):
    model = DDP(net)
    for x, y in loader:
        nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
    if rank == 0:
        val_loss = evaluate(model.module, loader)
        print(f"validation loss {val_loss:.4f}")
"""),
        "TD815",
    )


def test_metric_object_value_is_quiet() -> None:
    assert not lint_codes(
        _src("""
import torchmetrics

def train(rank, loader, net, optimizer):
    model = DDP(net)
    mean_loss = torchmetrics.MeanMetric()
    for x, y in loader:
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        mean_loss.update(loss)
    value = mean_loss.compute()
    if rank == 0:
        print(f"loss {value:.4f}")
"""),
        "TD815",
    )


def test_early_return_of_another_rank_check_is_quiet() -> None:
    assert not lint_codes(
        _src("""
def train(rank, world_size, model, loader, optimizer):
    model = DDP(model)
    for x, y in loader:
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        if world_size == 1:
            continue
        print(f"[rank {rank}] loss {loss.item():.4f}")
    if rank == 0:
        return
    print(f"[rank {rank}] done, last loss {loss.item():.4f}")
"""),
        "TD815",
    )


def test_step_returning_only_accuracy_as_logged_is_quiet() -> None:
    assert not lint_codes(
        _src("""
class Trainer:
    def __init__(self, net, rank):
        self.model = DDP(net)
        self.rank = rank

    def train_step(self, x, y, optimizer):
        logits = self.model(x)
        loss = nn.functional.cross_entropy(logits, y)
        loss.backward()
        optimizer.step()
        return loss.item(), 0.5

    def fit(self, loader, optimizer):
        for x, y in loader:
            loss_value, accuracy = self.train_step(x, y, optimizer)
            if self.rank == 0:
                print(f"accuracy {accuracy:.3f}")
"""),
        "TD815",
    )
