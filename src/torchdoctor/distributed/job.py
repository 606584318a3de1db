"""Running a multi-process job watched, with one report at the end.

Three ways a job comes to torchdoctor, one report each:

* :func:`run_followed`: ``torchdoctor run script.py`` runs the script in this process and
  follows the processes it starts (``torch.multiprocessing.spawn``, ``multiprocessing``,
  Python subprocesses; never DataLoader workers); their parts are merged here.
* :func:`launch`: ``torchdoctor run --nproc-per-node N script.py`` starts torch's own
  launcher (``python -m torch.distributed.run``), each rank running the script watched
  (:mod:`torchdoctor.distributed.rank`); this process merges the ranks' parts.
* :func:`gather_on_rank_zero`: ``torchrun ... torchdoctor run script.py``: every rank is a
  ``torchdoctor run``; the ranks other than 0 leave their part in a folder of the node
  (``TORCHDOCTOR_PARTS_DIR`` names a shared one across nodes) and rank 0 merges them,
  waiting for each at most ``TORCHDOCTOR_GATHER_TIMEOUT`` seconds (default 60).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from torchdoctor.distributed.merge import Part, merge_parts, read_parts
from torchdoctor.facts import Facts
from torchdoctor.findings import Depth, Location, Report

__all__ = [
    "RANK_ENV",
    "free_port",
    "gather_on_rank_zero",
    "launch",
    "rank_of_launcher",
    "run_followed",
    "run_job",
]

RANK_ENV = "TORCHDOCTOR_RANK"  # set by launch(): the options of every rank, as JSON


def run_followed(target: str, args: list[str], *, follow: bool = True, **options: Any) -> Any:
    """:func:`~torchdoctor.runtime.script.run_script`, following the script's children.

    Returns the :class:`~torchdoctor.runtime.script.ScriptResult` with one report: the
    script's own findings plus those of every child that trained, each with its ranks.
    """
    from torchdoctor.runtime.children import Following
    from torchdoctor.runtime.script import ScriptResult, run_script

    if not follow:
        return run_script(target, args, **options)
    script = None if options.get("module") else Path(target).resolve()
    config = _child_config(
        options,
        roots=(str(script.parent),) if script else (str(Path.cwd()),),
        script=str(script) if script else None,
    )
    following = Following(config)
    try:
        with following:
            result = run_script(target, args, **options)
        report = merge_parts(result.report, read_parts(following.parts()))
    finally:
        following.cleanup()
    return ScriptResult(report, result.exit_status, result.stopped_early)


def _child_config(options: dict[str, Any], **extra: Any) -> Any:
    """The watch options every child or rank runs with, from ``run``'s keyword options."""
    from torchdoctor.runtime.children import ChildConfig

    selection = options.get("selection")
    return ChildConfig(
        parts="",
        max_steps=options.get("max_steps"),
        sample_every=options.get("sample_every"),
        select=tuple(selection.select) if selection else ("TD",),
        ignore=tuple(selection.ignore) if selection else (),
        localise_non_finite=bool(options.get("localise_non_finite")),
        **extra,
    )


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def launch(
    target: str,
    args: list[str],
    nproc: int,
    *,
    module: bool = False,
    follow: bool = True,
    config: Any = None,
    timeout: float | None = None,
) -> Any:
    """Run ``target`` on ``nproc`` local ranks through ``torch.distributed.run``.

    Args:
        target: the script (or module, with ``module``) every rank runs.
        args: the script's arguments, untouched.
        nproc: processes on this node.
        module: run ``target`` as ``python -m target``.
        follow: each rank also follows the processes it starts.
        config: a :class:`~torchdoctor.runtime.children.ChildConfig` with the run's options.
        timeout: kill the job after this many seconds (``None``: never).

    Returns:
        A :class:`~torchdoctor.runtime.script.ScriptResult`: the merged report and the
        launcher's exit status (non-zero when a rank failed).
    """
    import json
    from dataclasses import asdict

    from torchdoctor.__about__ import __version__
    from torchdoctor._kernel import Reporter, run_detector
    from torchdoctor.distributed.hang import HANG_DIR_ENV, hang_findings, hang_records
    from torchdoctor.rules.selection import Selection
    from torchdoctor.runtime.children import ChildConfig
    from torchdoctor.runtime.script import ScriptResult

    folder = Path(tempfile.mkdtemp(prefix="torchdoctor-job-"))
    base_config = config or ChildConfig(parts="")
    settings = {**asdict(base_config), "parts": str(folder), "module": module, "follow": follow}
    env = {
        **os.environ,
        RANK_ENV: json.dumps(settings),
        "MASTER_ADDR": "127.0.0.1",
        HANG_DIR_ENV: str(folder),
    }
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nproc-per-node={nproc}",
        "--nnodes=1",
        "--master-addr=127.0.0.1",
        f"--master-port={free_port()}",
        "-m",
        "torchdoctor.distributed.rank",
        target,
        *args,
    ]
    started = time.time()
    status = _run_group(command, env, timeout, folder, nproc)
    parts = read_parts(sorted(folder.glob("part-*.json")))
    hangs = hang_records(folder)
    for path in folder.iterdir():
        if not path.name.startswith("stacks-"):  # the stacks stay for the user to read
            with contextlib.suppress(OSError):
                path.unlink()
    with contextlib.suppress(OSError):
        folder.rmdir()
    base = Report(
        tool_version=__version__,
        command="run",
        created=time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(started)),
        facts=Facts({"launcher": "torch.distributed.run", "nproc_per_node": nproc}),
    )
    report = merge_parts(base, parts)
    report.facts.setdefault("world_size", nproc)

    def report_hangs(out: Reporter) -> None:  # TD813, judged here from every rank's record
        for item in hang_findings(hangs, nproc):
            out.emit(item)

    watchdog = "the hang watchdog"
    selection = Selection(base_config.select, base_config.ignore)
    report.extend(
        run_detector(
            watchdog, ("TD813",), report_hangs, Depth.RUN, Location(object=watchdog), selection
        )
    )
    if status == _HUNG:
        report.facts["stopped_hung_job"] = True
    _note_missing(report, nproc, parts)
    report.exit_status = status
    return ScriptResult(report, status, False)


_HUNG = 125  # the launcher's status when it stopped a hung job


def _run_group(
    command: list[str], env: dict[str, str], timeout: float | None, folder: Path, world: int
) -> int:
    """Run ``command`` in its own process group; the whole group goes on timeout, on
    Ctrl-C, or when the ranks' hang records show the job is stuck."""
    from torchdoctor.distributed.hang import hang_records, job_is_hung

    process = subprocess.Popen(command, env=env, start_new_session=True)
    deadline = None if timeout is None else time.monotonic() + timeout
    first_seen: float | None = None
    try:
        while True:
            try:
                return process.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                pass
            now = time.monotonic()
            if deadline is not None and now > deadline:
                _kill_group(process)
                return 124
            records = hang_records(folder)
            if records and first_seen is None:
                first_seen = now
            if records and job_is_hung(records, world, first_seen, now):
                print(
                    "torchdoctor: the job is hung (see above); stopping it to report",
                    file=sys.stderr,
                    flush=True,
                )
                _kill_group(process, signal.SIGKILL)  # hung ranks answer no gentler signal
                return _HUNG
    except KeyboardInterrupt:
        _kill_group(process, signal.SIGINT)
        return 130


def _kill_group(process: subprocess.Popen[Any], sig: int = signal.SIGTERM) -> None:
    # torchrun starts each rank in a session of its own, so the launcher's group does not
    # hold them: signal the ranks by pid first, or a hung rank outlives the job forever.
    ranks = _descendants(process.pid)
    _signal_all(ranks, sig)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, sig)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    # A rank stuck in a collective never runs its SIGTERM handler: end what is left.
    _signal_all(ranks, signal.SIGKILL)


def _signal_all(processes: list[tuple[int, str]], sig: int) -> None:
    for pid, started in processes:
        stat = _stat_fields(pid)
        if stat is None or stat[19] != started:
            continue  # gone, or the pid now belongs to another process
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _descendants(root: int) -> list[tuple[int, str]]:
    """Every process below ``root`` as ``(pid, start time)``, read from ``/proc`` (empty
    where there is none); the start time tells a reused pid from the process seen."""
    children: dict[int, list[tuple[int, str]]] = {}
    for entry in Path("/proc").glob("[0-9]*/stat"):
        stat = _stat_fields(int(entry.parent.name))
        if stat is not None:
            children.setdefault(int(stat[1]), []).append((int(entry.parent.name), stat[19]))
    found: list[tuple[int, str]] = []
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), ()):
            found.append(child)
            stack.append(child[0])
    return found


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command name (state, ppid, ...)."""
    try:
        # The command name may hold spaces or parentheses: the rest follows the last ')'.
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except (OSError, ValueError):
        return None
    return fields if len(fields) > 19 else None


def _note_missing(report: Report, world: int, parts: list[Part]) -> None:
    seen = {p.rank for p in parts}
    missing = sorted(set(range(world)) - seen)
    if missing:
        report.facts["missing_ranks"] = missing


# -- torchrun ... torchdoctor run script.py ----------------------------------------------


def rank_of_launcher() -> tuple[int, int] | None:
    """``(rank, world_size)`` when this process is a rank started by torchrun (or any
    launcher that sets ``RANK`` and ``WORLD_SIZE``) without :func:`launch`; else ``None``."""
    if RANK_ENV in os.environ:
        return None
    try:
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    except (KeyError, ValueError):
        return None
    return (rank, world) if world > 1 else None


def _job_folder() -> Path:
    shared = os.environ.get("TORCHDOCTOR_PARTS_DIR")
    job = "-".join(
        os.environ.get(k, "x") for k in ("TORCHELASTIC_RUN_ID", "MASTER_ADDR", "MASTER_PORT")
    )
    base = Path(shared) if shared else Path(tempfile.gettempdir())
    return base / f"torchdoctor-job-{''.join(c if c.isalnum() else '_' for c in job)}"


def gather_on_rank_zero(report: Report, rank: int, world: int, started: float) -> Report | None:
    """Hand a rank's report to rank 0; on rank 0, return the job's merged report.

    Ranks other than 0 write their part and get ``None``. Rank 0 waits for every other
    rank's part (at most ``TORCHDOCTOR_GATHER_TIMEOUT`` seconds in all), merges what came,
    and lists the ranks that sent nothing in ``facts["missing_ranks"]``.
    """
    from torchdoctor.runtime.children import write_part

    folder = _job_folder()
    if rank != 0:
        write_part(folder, report, rank)
        return None
    limit = float(os.environ.get("TORCHDOCTOR_GATHER_TIMEOUT", "60"))
    deadline = time.monotonic() + limit
    while True:
        fresh = [p for p in folder.glob("part-*.json") if _newer(p, started)]
        if len(fresh) >= world - 1 or time.monotonic() >= deadline:
            break
        time.sleep(0.05)  # waiting on other processes' files: nothing to block on
    parts = [p for p in read_parts(sorted(fresh)) if p.rank not in (None, 0)]
    for path in fresh:
        with contextlib.suppress(OSError):
            path.unlink()
    with contextlib.suppress(OSError):
        folder.rmdir()  # only when empty: a part of a later job stays
    own = Part(report, 0, world, os.getpid())
    base = Report(
        tool_version=report.tool_version,
        command=report.command,
        created=report.created,
        exit_status=report.exit_status,
        facts=Facts({"launcher": "torchrun"}),
    )
    merged = merge_parts(base, [own, *parts])
    merged.facts["world_size"] = max(world, int(merged.facts.get("world_size", 0)))
    _note_missing(merged, world, [own, *parts])
    return merged


def _newer(path: Path, started: float) -> bool:
    try:
        return path.stat().st_mtime >= started - 1.0
    except OSError:
        return False


def run_job(
    target: str,
    args: list[str],
    *,
    nproc_per_node: int | None = None,
    follow: bool = True,
    **options: Any,
) -> Any:
    """What ``torchdoctor run`` does: one process, a launched job, or one torchrun rank.

    Returns a :class:`~torchdoctor.runtime.script.ScriptResult` whose report is the whole
    job's; on a torchrun rank other than 0, the script's exit status alone (its findings
    went to rank 0's report, it has nothing to print).
    """
    from torchdoctor.runtime.script import ScriptResult

    if nproc_per_node is not None:
        config = _child_config(options)
        return launch(
            target,
            args,
            nproc_per_node,
            module=bool(options.get("module")),
            follow=follow,
            config=config,
        )
    launched = rank_of_launcher()
    started = time.time()
    result = run_followed(target, args, follow=follow, **options)
    if launched is None:
        return result
    rank, world = launched
    result.report.facts.setdefault("rank", rank)
    merged = gather_on_rank_zero(result.report, rank, world, started)
    if merged is None:
        return int(result.exit_status)
    return ScriptResult(merged, result.exit_status, result.stopped_early)
