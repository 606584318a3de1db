"""TD810 for tensors outside the DDP module: every tensor an optimizer steps stays
identical across ranks, in a real 2-rank gloo job.

Three shapes of the bug, each beside its fix: a loss's own parameter in a plain loop, a
head kept beside the DDP model by a trainer class, and a tensor-parallel block whose
gradient post-processing runs from a callback on one rank only. Correct programs that look
alike stay quiet: ranks that train independent models on their own data.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
from typing import Any

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.needs_torch]

JOB_TIMEOUT = 240  # seconds, for a loaded 2-core machine; the job takes ~10

JOB = """
import json
import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

import torchdoctor

STEPS = 10


def net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))


def data(rank, step):
    g = torch.Generator().manual_seed(100 * step + rank)
    x = torch.randn(16, 8, generator=g)
    return x, (x[:, 0] > 0).long() + 2 * (x[:, 1] > 0).long()


class TemperatureLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.log_t = nn.Parameter(torch.zeros(()))

    def forward(self, logits, y):
        return nn.functional.cross_entropy(logits / self.log_t.exp(), y)


def loss_parameter(rank, fixed):
    model, criterion = DDP(net()), TemperatureLoss()
    optimizer = torch.optim.SGD([*model.parameters(), *criterion.parameters()], lr=0.1)
    for step in range(STEPS):
        x, y = data(rank, step)
        optimizer.zero_grad()
        criterion(model(x), y).backward()
        if fixed:  # the loss's parameter is reduced like the model's
            dist.all_reduce(criterion.log_t.grad)
            criterion.log_t.grad /= dist.get_world_size()
        optimizer.step()


class Trainer:
    def __init__(self, rank, fixed):
        self.rank = rank
        backbone, head = net(), nn.Linear(4, 4)
        if fixed:
            self.model = DDP(nn.Sequential(backbone, head))
        else:
            self.model = nn.Sequential(DDP(backbone), head)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-2)

    def _loss(self, step):
        x, y = data(self.rank, step)
        return nn.functional.cross_entropy(self.model(x), y)

    def _update(self, step):
        self.optimizer.zero_grad()
        self._loss(step).backward()
        self.optimizer.step()

    def fit(self):
        for step in range(STEPS):
            self._update(step)


def head_beside(rank, fixed):
    Trainer(rank, fixed).fit()


class CopyToParallel(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, grad):
        grad = grad.clone()
        dist.all_reduce(grad)
        return grad


class ReduceFromParallel(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x = x.clone()
        dist.all_reduce(x)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad


class ParallelBlock(nn.Module):
    # Megatron-style: a column-parallel then a row-parallel product, replicated ends

    def __init__(self, rank):
        super().__init__()
        torch.manual_seed(0)
        self.norm = nn.LayerNorm(8)
        self.shard = nn.Parameter(torch.randn(4, 8, generator=torch.Generator().manual_seed(rank)))
        self.shard.tensor_model_parallel = True
        self.out = nn.Linear(8, 1)

    def forward(self, x):
        h = CopyToParallel.apply(self.norm(x))
        h = nn.functional.linear(h, self.shard).relu()
        h = ReduceFromParallel.apply(nn.functional.linear(h, self.shard.t()))
        return self.out(h)


def tensor_parallel(rank, fixed):
    model = ParallelBlock(rank)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    def scale_replicated(params):
        for p in params:
            if p.grad is not None and not getattr(p, "tensor_model_parallel", False):
                if fixed or rank == 0:
                    p.grad.mul_(0.5)
    after_backward = [scale_replicated]
    for step in range(STEPS):
        x, _ = data(0, step)  # the same batch on every tensor-parallel rank
        optimizer.zero_grad()
        model(x).pow(2).mean().backward()
        for callback in after_backward:
            callback(model.parameters())
        optimizer.step()


def ensemble(rank, fixed):
    model = net()  # the same start on every rank, then each trains alone on its own data
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(STEPS):
        x, y = data(rank, step)
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()


CASES = {"loss_parameter": loss_parameter, "head_beside": head_beside,
         "tensor_parallel": tensor_parallel, "ensemble": ensemble}


def run_case(name, fixed, rank):
    with torchdoctor.watch() as watched:
        CASES[name](rank, fixed)
    found = watched.report.by_code("TD810")
    return {
        "td810": [dict(f.evidence) for f in found],
        "objects": [f.location.object for f in found],
        "others": sorted({f.code for f in watched.report.findings if f.code in ("TD811", "TD001")}),
    }


def train(rank, port, folder):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE="2")
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    seen = {f"{name}:{fixed}": run_case(name, fixed, rank)
            for name in CASES for fixed in (False, True)}
    dist.destroy_process_group()
    with open(os.path.join(folder, f"rank{rank}.json"), "w") as out:
        json.dump(seen, out)


if __name__ == "__main__":
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    mp.spawn(train, args=(port, sys.argv[1]), nprocs=2)
"""


@pytest.fixture(scope="module")
def seen(tmp_path_factory: pytest.TempPathFactory) -> dict[int, dict[str, Any]]:
    folder = tmp_path_factory.mktemp("replicas")
    (folder / "job.py").write_text(textwrap.dedent(JOB), encoding="utf-8")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen(
        [sys.executable, "job.py", str(folder)],
        cwd=folder,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        _, err = process.communicate(timeout=JOB_TIMEOUT)
    finally:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        if process.returncode is None:
            process.communicate()
    assert process.returncode == 0, err
    return {rank: json.loads((folder / f"rank{rank}.json").read_text()) for rank in (0, 1)}


@pytest.mark.parametrize("case", ["loss_parameter", "head_beside", "tensor_parallel"])
def test_a_stepped_tensor_outside_ddp_that_diverges_is_found(
    seen: dict[int, dict[str, Any]], case: str
) -> None:
    for rank in (0, 1):
        result = seen[rank][f"{case}:False"]
        assert len(result["td810"]) == 1, result
        assert result["td810"][0]["outside_ddp"] is True
        assert "TD001" not in result["others"]


def test_the_finding_names_the_tensor(seen: dict[int, dict[str, Any]]) -> None:
    assert seen[0]["loss_parameter:False"]["objects"] == ["TemperatureLoss.log_t"]
    assert seen[0]["tensor_parallel:False"]["td810"][0]["differing"] == [
        "norm.weight",
        "norm.bias",
        "out.weight",
        "out.bias",
    ]


@pytest.mark.parametrize("case", ["loss_parameter", "head_beside", "tensor_parallel", "ensemble"])
def test_replicas_kept_equal_and_independent_ranks_are_quiet(
    seen: dict[int, dict[str, Any]], case: str
) -> None:
    for rank in (0, 1):
        result = seen[rank][f"{case}:True"]
        assert result["td810"] == [] and result["others"] == [], result


def test_independent_ranks_are_quiet_even_unfixed(seen: dict[int, dict[str, Any]]) -> None:
    for rank in (0, 1):
        assert seen[rank]["ensemble:False"]["td810"] == []
