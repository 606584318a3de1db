"""TD814 at run depth: torch's clip_grad_norm_ over a sharded FSDP1 model, in a real
2-rank gloo job (FSDP1, FSDP2 and DDP on the CPU).

One job runs every case in turn, each under its own ``torchdoctor.watch()``, and every
rank writes what it saw to a JSON file. The job is a subprocess with a timeout, in its own
process group that is killed whatever happens.
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

JOB_TIMEOUT = 240  # seconds: generous for a loaded 2-core machine; the job takes ~10

JOB = """
import json
import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp import ShardingStrategy, fully_shard
from torch.nn.parallel import DistributedDataParallel as DDP

import torchdoctor

CPU = torch.device("cpu")
MAX_NORM = 0.05


def net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))


def build(case, world):
    if case == "fsdp1_torch_clip":
        return FSDP(net(), device_id=CPU)
    if case in ("fsdp1_orig_params_keyword", "fsdp1_method"):
        return FSDP(net(), device_id=CPU, use_orig_params=True)
    if case == "fsdp1_no_shard":
        return FSDP(net(), device_id=CPU, sharding_strategy=ShardingStrategy.NO_SHARD)
    if case == "ddp_torch_clip":
        return DDP(net())
    model = net()
    fully_shard(model, mesh=init_device_mesh("cpu", (world,)))
    return model


def clip(case, model):
    if case == "fsdp1_method":
        return model.clip_grad_norm_(MAX_NORM)
    if case == "fsdp1_orig_params_keyword":
        return torch.nn.utils.clip_grad_norm_(
            parameters=[p for p in model.parameters()], max_norm=MAX_NORM
        )
    return torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM)  # CLIP LINE


def run_case(case, rank, world):
    model = build(case, world)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    generator = torch.Generator().manual_seed(10 + rank)
    norms, after = [], []
    with torchdoctor.watch() as watched:
        for _ in range(6):  # past the gradient detectors' minimum of 5 steps
            optimizer.zero_grad()
            x = torch.randn(8, 8, generator=generator)
            model(x).pow(2).mean().backward()
            norms.append(float(_total(clip(case, model))))
            grads = [p.grad for p in model.parameters() if p.grad is not None]
            after.append(float(_plain(torch.linalg.vector_norm(
                torch.stack([torch.linalg.vector_norm(_plain(g)) for g in grads])))))
            optimizer.step()
    found = [f for f in watched.report.findings if f.code == "TD814"]
    return {
        "lines": sorted({f.location.line for f in found}),
        "others": sorted({f.code for f in watched.report.findings
                          if f.code != "TD814" and f.severity.value != "info"}),
        "evidence": [dict(f.evidence) for f in found],
        "norms": norms,
        "after": after,
    }


def _plain(value):
    return value.to_local() if hasattr(value, "to_local") else value


def _total(norm):
    return norm.full_tensor() if hasattr(norm, "full_tensor") else norm


def train(rank, port, folder, cases):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE="2")
    dist.init_process_group("gloo")
    seen = {case: run_case(case, rank, 2) for case in cases}
    dist.destroy_process_group()
    with open(os.path.join(folder, f"rank{rank}.json"), "w") as out:
        json.dump(seen, out)


if __name__ == "__main__":
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    mp.spawn(train, args=(port, sys.argv[1], sys.argv[2].split(",")), nprocs=2)
"""

JOB_STDERR: list[str] = []  # what the job printed on standard error, once it has run

FLAGGED = ("fsdp1_torch_clip", "fsdp1_orig_params_keyword")
QUIET = ("fsdp1_method", "fsdp1_no_shard", "ddp_torch_clip", "fsdp2_torch_clip")


def _clip_lines(source: str) -> set[int]:
    return {
        number
        for number, line in enumerate(source.splitlines(), start=1)
        if "torch.nn.utils.clip_grad_norm_(" in line
    }


@pytest.fixture(scope="module")
def seen(tmp_path_factory: pytest.TempPathFactory) -> dict[int, dict[str, Any]]:
    folder = tmp_path_factory.mktemp("clipping")
    (folder / "job.py").write_text(textwrap.dedent(JOB), encoding="utf-8")
    command = [sys.executable, "job.py", str(folder), ",".join(FLAGGED + QUIET)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen(
        command, cwd=folder, env=env, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        _, err = process.communicate(timeout=JOB_TIMEOUT)
    finally:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        if process.returncode is None:
            process.communicate()
    assert process.returncode == 0, err
    JOB_STDERR.append(err)
    return {rank: json.loads((folder / f"rank{rank}.json").read_text()) for rank in (0, 1)}


@pytest.mark.parametrize("case", FLAGGED)
def test_torch_clip_over_sharded_fsdp1_is_flagged_on_every_rank(
    seen: dict[int, dict[str, Any]], case: str
) -> None:
    lines = _clip_lines(textwrap.dedent(JOB))
    for rank in (0, 1):
        result = seen[rank][case]
        assert len(result["lines"]) == 1 and set(result["lines"]) <= lines, result
        evidence = result["evidence"][0]
        assert evidence["shard_group_size"] == 2
        assert evidence["sharding_strategy"] == "FULL_SHARD"
        # the evidence is the norm the user's call returned: this rank's shard's
        assert evidence["local_norm"] == pytest.approx(result["norms"][0], rel=1e-5)
    # the two ranks' "total norms" differ: each is its own shard's
    assert seen[0][case]["norms"][0] != pytest.approx(seen[1][case]["norms"][0], rel=1e-3)


@pytest.mark.parametrize("case", QUIET)
def test_correct_clipping_is_quiet(seen: dict[int, dict[str, Any]], case: str) -> None:
    for rank in (0, 1):
        assert seen[rank][case]["lines"] == [], seen[rank][case]
    # and the norms really agree across ranks, as the rule assumes for these shapes
    assert seen[0][case]["norms"] == pytest.approx(seen[1][case]["norms"], rel=1e-5)


@pytest.mark.parametrize("case", FLAGGED + QUIET)
def test_sharded_parameters_raise_no_other_alarm(
    seen: dict[int, dict[str, Any]], case: str
) -> None:
    """FSDP1's graph ends at its flat parameter, and a parameter outside this rank's shard
    has no ``.grad`` here: neither is a loss cut from the model (TD209) or a parameter that
    never gets a gradient (TD208)."""
    for rank in (0, 1):
        assert seen[rank][case]["others"] == [], seen[rank][case]


def test_the_wrapped_function_still_clips(seen: dict[int, dict[str, Any]]) -> None:
    """Watching changes nothing: a generator of parameters is still clipped in place."""
    result = seen[0]["ddp_torch_clip"]
    assert all(norm > 0.05 for norm in result["norms"]), result
    assert all(value == pytest.approx(0.05, rel=1e-3) for value in result["after"]), result


def test_watching_a_job_prints_no_warning_of_its_own(seen: dict[int, dict[str, Any]]) -> None:
    """Looking for DDP models among live objects must not read attributes that warn
    (``torch.distributed.reduce_op`` prints a FutureWarning when read)."""
    assert "reduce_op" not in JOB_STDERR[0], JOB_STDERR[0]
