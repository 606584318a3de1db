"""``torchdoctor run`` follows the processes a script starts to train (real processes).

Every job runs as a subprocess with a timeout, in its own process group that is killed
whatever happens, so a hang fails its test and leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.needs_torch]

JOB_TIMEOUT = 240  # seconds: generous for a loaded 2-core machine; a job takes a few


def run_cli(
    args: list[str], cwd: Path, timeout: float = JOB_TIMEOUT, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``torchdoctor ARGS`` in ``cwd``; the process group is killed on timeout or error."""
    command = [sys.executable, "-c", "from torchdoctor.cli import main; main()", *args]
    full_env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "OMP_NUM_THREADS": "1", **(env or {})}
    process = subprocess.Popen(
        command,
        cwd=cwd,
        env=full_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = process.communicate(timeout=timeout)
    finally:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        if process.returncode is None:
            process.communicate()
    return subprocess.CompletedProcess(command, process.returncode, out, err)


def run_json(args: list[str], cwd: Path, **kwargs: Any) -> tuple[dict[str, Any], str]:
    """Run with ``--format json``; returns the report and the standard error."""
    result = run_cli(["run", "--format", "json", *args], cwd, **kwargs)
    assert result.stdout.strip(), f"no report (exit {result.returncode}):\n{result.stderr}"
    return json.loads(result.stdout[result.stdout.index("{") :]), result.stderr


def write(folder: Path, name: str, source: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return path


TRAIN_NO_ZERO_GRAD = """
    import torch
    from torch import nn


    def train(rank=0, world=1):
        torch.manual_seed(rank)
        model = nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        for _ in range(4):
            loss = model(torch.randn(8, 4)).pow(2).mean()
            loss.backward()
            optimizer.step()
"""


def _codes(report: dict[str, Any]) -> dict[str, list[int]]:
    return {f["code"]: f.get("ranks", []) for f in report["findings"]}


def test_spawned_workers_are_watched_and_merged(tmp_path: Path) -> None:
    write(
        tmp_path,
        "job.py",
        TRAIN_NO_ZERO_GRAD
        + """
    if __name__ == "__main__":
        import torch.multiprocessing as mp
        mp.spawn(train, args=(2,), nprocs=2)
    """,
    )
    report, err = run_json(["job.py"], tmp_path)
    assert _codes(report).get("TD201") == [0, 1], err
    assert report["facts"]["world_size"] == 2
    assert report["facts"]["steps"] == 4


def test_forked_process_is_watched_and_no_follow_children_opts_out(tmp_path: Path) -> None:
    write(
        tmp_path,
        "job.py",
        TRAIN_NO_ZERO_GRAD
        + """
    if __name__ == "__main__":
        import multiprocessing
        process = multiprocessing.get_context("fork").Process(target=train)
        process.start()
        process.join()
        raise SystemExit(process.exitcode)
    """,
    )
    report, err = run_json(["job.py"], tmp_path)
    assert "TD201" in _codes(report), err
    quiet, err = run_json(["--no-follow-children", "job.py"], tmp_path)
    assert "TD201" not in _codes(quiet), err
    assert not quiet["facts"].get("steps")


def test_python_subprocess_is_watched(tmp_path: Path) -> None:
    write(
        tmp_path,
        "worker.py",
        TRAIN_NO_ZERO_GRAD
        + """
    if __name__ == "__main__":
        train()
    """,
    )
    write(
        tmp_path,
        "job.py",
        """
    import subprocess
    import sys

    if __name__ == "__main__":
        subprocess.run([sys.executable, "worker.py"], check=True)
    """,
    )
    report, err = run_json(["job.py"], tmp_path)
    assert "TD201" in _codes(report), err


def test_dataloader_workers_are_not_followed(tmp_path: Path) -> None:
    write(
        tmp_path,
        "job.py",
        """
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    if __name__ == "__main__":
        torch.manual_seed(0)
        data = TensorDataset(torch.randn(32, 4), torch.randn(32, 1))
        loader = DataLoader(data, batch_size=8, num_workers=2)
        model = nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        for x, y in loader:
            optimizer.zero_grad()
            nn.functional.mse_loss(model(x), y).backward()
            optimizer.step()
    """,
    )
    report, err = run_json(["job.py"], tmp_path)
    assert report["facts"]["steps"] == 4, err
    assert "world_size" not in report["facts"]
    assert "ranks" not in report["facts"]


DDP_BYPASS = """
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP


    def main():
        dist.init_process_group("gloo")
        torch.manual_seed(0)
        model = DDP(nn.Linear(4, 1))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        torch.manual_seed(dist.get_rank())
        for _ in range(4):
            optimizer.zero_grad()
            model.module(torch.randn(8, 4)).pow(2).mean().backward()
            optimizer.step()
        dist.destroy_process_group()


    if __name__ == "__main__":
        main()
"""


def test_nproc_per_node_launches_ranks_and_writes_one_report(tmp_path: Path) -> None:
    write(tmp_path, "job.py", DDP_BYPASS)
    result = run_cli(["run", "--nproc-per-node", "2", "--report", "r.json", "job.py"], tmp_path)
    assert result.returncode == 0, result.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert _codes(report).get("TD811") == [0, 1], result.stdout
    assert report["facts"]["world_size"] == 2
    assert "(all 2 ranks)" in result.stdout


def test_torchrun_of_torchdoctor_run_reports_once_on_rank_zero(tmp_path: Path) -> None:
    from torchdoctor.distributed.job import free_port

    write(tmp_path, "job.py", DDP_BYPASS)
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc-per-node=2",
        "--master-addr=127.0.0.1",
        f"--master-port={free_port()}",
        str(Path(sys.executable).parent / "torchdoctor"),
        "run",
        "--report",
        "r.json",
        "job.py",
    ]
    env = {**os.environ, "TORCHDOCTOR_PARTS_DIR": str(tmp_path / "parts")}
    process = subprocess.Popen(
        command,
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = process.communicate(timeout=JOB_TIMEOUT)
    finally:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 0, err
    report = json.loads((tmp_path / "r.json").read_text())
    assert _codes(report).get("TD811") == [0, 1], out
    assert out.count("TD811") == 1  # one report, printed by rank 0 only
    assert not list((tmp_path / "parts").glob("*/part-*.json"))


def test_a_rank_that_dies_is_named_in_the_report(tmp_path: Path) -> None:
    write(
        tmp_path,
        "job.py",
        """
    import os

    import torch
    import torch.distributed as dist
    from torch import nn


    if __name__ == "__main__":
        dist.init_process_group("gloo")
        if dist.get_rank() == 1:
            os._exit(3)
        model = nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        for _ in range(2):
            optimizer.zero_grad()
            model(torch.randn(8, 4)).pow(2).mean().backward()
            optimizer.step()
    """,
    )
    report, err = run_json(["--nproc-per-node", "2", "job.py"], tmp_path)
    assert report["exit_status"] != 0, err
    assert 1 in report["facts"]["missing_ranks"]


def test_watch_inside_a_users_ddp_script_compares_the_ranks(tmp_path: Path) -> None:
    write(
        tmp_path,
        "job.py",
        """
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


    def train(rank, port, folder, bypass):
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                          WORLD_SIZE="2")
        dist.init_process_group("gloo")
        torch.manual_seed(0)
        model = DDP(nn.Linear(4, 1))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        torch.manual_seed(rank)
        with torchdoctor.watch() as watched:
            for _ in range(4):
                optimizer.zero_grad()
                forward = model.module if bypass else model
                forward(torch.randn(8, 4)).pow(2).mean().backward()
                optimizer.step()
        dist.destroy_process_group()
        facts = watched.report.facts
        with open(os.path.join(folder, f"rank{rank}.json"), "w") as out:
            json.dump({"codes": sorted(watched.report.codes()), "rank": facts.get("rank"),
                       "world_size": facts.get("world_size")}, out)


    if __name__ == "__main__":
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        mp.spawn(train, args=(port, sys.argv[1], sys.argv[2] == "bypass"), nprocs=2)
    """,
    )
    for mode, expected in (("bypass", True), ("wrapper", False)):
        folder = tmp_path / mode
        folder.mkdir()
        command = [sys.executable, "job.py", str(folder), mode]
        process = subprocess.Popen(
            command, cwd=tmp_path, stderr=subprocess.PIPE, text=True, start_new_session=True
        )
        try:
            _, err = process.communicate(timeout=JOB_TIMEOUT)
        finally:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
        assert process.returncode == 0, err
        for rank in (0, 1):
            seen = json.loads((folder / f"rank{rank}.json").read_text())
            assert seen["rank"] == rank and seen["world_size"] == 2
            assert ("TD811" in seen["codes"]) is expected, (mode, seen)


def test_ddp_unused_parameter_error_names_the_parameters(tmp_path: Path) -> None:
    write(
        tmp_path,
        "job.py",
        """
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP


    class TwoHeads(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Linear(4, 8)
            self.head = nn.Linear(8, 1)
            self.spare = nn.Linear(8, 1)

        def forward(self, x):
            return self.head(self.body(x))


    if __name__ == "__main__":
        dist.init_process_group("gloo")
        torch.manual_seed(0)
        model = DDP(TwoHeads())
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        for _ in range(3):
            optimizer.zero_grad()
            model(torch.randn(8, 4)).pow(2).mean().backward()
            optimizer.step()
    """,
    )
    report, err = run_json(["--nproc-per-node", "2", "job.py"], tmp_path)
    (unused,) = [f for f in report["findings"] if f["code"] == "TD208"]
    assert "`spare.weight`, `spare.bias`" in unused["message"], err
    assert unused["ranks"] == [0, 1]


def _processes_running(path: Path) -> list[int]:
    """Pids of live processes whose command line names ``path``."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            if str(path).encode() in cmdline.read_bytes():
                found.append(int(cmdline.parent.name))
    return found


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
def test_a_stopped_hung_job_leaves_no_rank_behind(tmp_path: Path) -> None:
    # torchrun starts each rank in a session of its own: stopping the launcher's process
    # group alone left the hung ranks running forever.
    lab = Path(__file__).resolve().parents[2] / "examples" / "lab"
    [hung] = lab.glob("TD813-*/buggy.py")
    script = tmp_path / "hung_job.py"
    script.write_text(hung.read_text(encoding="utf-8"), encoding="utf-8")
    report, _ = run_json(
        ["--nproc-per-node", "2", str(script)], tmp_path, env={"TORCHDOCTOR_HANG_TIMEOUT": "3"}
    )
    assert "TD813" in _codes(report)
    assert report["facts"].get("stopped_hung_job") is True
    assert _processes_running(script) == []
