"""TD813: a rank stopped making progress; say where every rank is stuck.

A job hangs when one rank stops (a deadlock, an endless loop, a collective that only it
skips or only it calls) while the others wait in a collective for it: nothing fails until
the collective's timeout, often 30 minutes later, with an error that names no cause.

On each rank of a multi-rank job a daemon thread (:class:`Watchdog`) notes the time of the
last optimizer step or DataLoader batch. When neither came for ``TORCHDOCTOR_HANG_TIMEOUT``
seconds (default 300), it looks at the main thread's stack once: the user's line it is at, and
the collective it waits in (a ``torch.distributed`` call, or the gradient all-reduce of a
DDP backward). It writes every thread's stack (``faulthandler``) and a hang record into
the job's folder, and says so on standard error. ``torchdoctor run --nproc-per-node``
watches that folder: once a rank waits in a collective and every rank has written its
record (or a grace period after the first), it stops the job and reports TD813, naming the
rank that is not in a collective, and where each rank stands.
"""

from __future__ import annotations

import faulthandler
import json
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from torchdoctor.findings import Depth, Finding, Location
from torchdoctor.rules.registry import finding

__all__ = [
    "HANG_DIR_ENV",
    "Watchdog",
    "hang_findings",
    "hang_records",
    "hang_timeout",
    "job_is_hung",
]

HANG_DIR_ENV = "TORCHDOCTOR_HANG_DIR"  # where ranks write hang records (set by launch)
_DEFAULT_TIMEOUT_S = 300.0


def hang_timeout() -> float:
    """Seconds without a step before a rank counts as stuck (``TORCHDOCTOR_HANG_TIMEOUT``)."""
    try:
        return max(0.5, float(os.environ.get("TORCHDOCTOR_HANG_TIMEOUT", _DEFAULT_TIMEOUT_S)))
    except ValueError:
        return _DEFAULT_TIMEOUT_S


class Watchdog:
    """One rank's watch for a stall; :meth:`progress` at every step, :meth:`stop` at the end.

    Args:
        rank: this process's rank.
        folder: where to write the hang record and the stacks.
        user_site: maps a frame to the user's innermost frame (``path``, ``line``) or None.
        timeout_s: seconds without progress before the stall is recorded.
    """

    def __init__(
        self,
        rank: int,
        folder: Path,
        user_site: Callable[[Any], tuple[str, int] | None],
        timeout_s: float | None = None,
    ) -> None:
        self.rank = rank
        self.folder = folder
        self.timeout_s = timeout_s if timeout_s is not None else hang_timeout()
        self._user_site = user_site
        self._main = threading.main_thread().ident
        self._last = time.monotonic()
        self._step = 0
        self._stop = threading.Event()
        self.fired = False
        self._thread = threading.Thread(
            target=self._watch, name="torchdoctor-hang-watchdog", daemon=True
        )
        self._thread.start()

    def progress(self, step: int | None = None) -> None:
        """A step (or a batch) went by: the rank is making progress."""
        self._last = time.monotonic()
        if step is not None:
            self._step = step

    def stop(self) -> None:
        """End the watch (the run ended)."""
        self._stop.set()

    def _watch(self) -> None:
        poll = min(1.0, self.timeout_s / 4)
        while not self._stop.wait(poll):
            armed = self._step > 0  # start-up (imports, DDP's first broadcast) is not a stall
            if armed and not self.fired and time.monotonic() - self._last > self.timeout_s:
                self.fired = True
                try:
                    self._record()
                except Exception:  # noqa: BLE001 - a watchdog never breaks the run
                    return

    def _record(self) -> None:
        frame = sys._current_frames().get(self._main or 0)
        stack = traceback.extract_stack(frame) if frame is not None else []
        collective = _collective(stack)
        site = self._user_site(frame) if frame is not None else None
        self.folder.mkdir(parents=True, exist_ok=True)
        stacks = self.folder / f"stacks-rank{self.rank}.txt"
        with stacks.open("w", encoding="utf-8") as out:
            faulthandler.dump_traceback(out, all_threads=True)
        record = {
            "rank": self.rank,
            "step": self._step,
            "collective": collective,
            "path": site[0] if site else None,
            "line": site[1] if site else None,
            "waited_s": round(time.monotonic() - self._last, 1),
            "stack": [f"{f.filename}:{f.lineno} in {f.name}" for f in stack[-8:]],
            "stacks_file": str(stacks),
        }
        target = self.folder / f"hang-rank{self.rank}.json"
        temporary = target.with_suffix(".tmp")
        temporary.write_text(json.dumps(record), encoding="utf-8")
        temporary.replace(target)
        where = f" at {Path(site[0]).name}:{site[1]}" if site else ""
        inside = f", waiting in `{collective}`" if collective else ""
        print(
            f"torchdoctor: rank {self.rank} has finished no step for "
            f"{record['waited_s']:.0f} s (after step {self._step}){where}{inside}; "
            f"stacks of every thread in {stacks}",
            file=sys.stderr,
            flush=True,
        )


def _collective(stack: list[traceback.FrameSummary]) -> str | None:
    """The collective the main thread waits in, from its innermost frames."""
    for frame in reversed(stack):
        name = frame.filename.replace("\\", "/")
        if "/torch/distributed/" in name and not frame.name.startswith("_"):
            return f"torch.distributed.{frame.name}"
        if "/torch/autograd/" in name and frame.name == "backward":
            return "backward (DDP's gradient all-reduce)"
    return None


def hang_records(folder: Path) -> list[dict[str, Any]]:
    """The hang records the ranks wrote into ``folder``, by rank."""
    records = []
    for path in sorted(folder.glob("hang-rank*.json")):
        try:
            records.append(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue
    return sorted(records, key=lambda r: int(r.get("rank", 0)))


def job_is_hung(
    records: list[dict[str, Any]], world: int, first_seen: float | None, now: float
) -> bool:
    """Whether the launcher should stop the job: some rank waits in a collective, and
    every rank has reported, or the first report is a grace period old (a rank that is
    stuck too hard to report, or dead)."""
    if not any(r.get("collective") for r in records):
        return False  # every reporting rank is busy outside collectives: slow, not hung
    if len(records) >= world:
        return True
    return first_seen is not None and now - first_seen > max(5.0, hang_timeout())


def hang_findings(records: list[dict[str, Any]], world: int) -> list[Finding]:
    """TD813 findings: one for the ranks that are not in a collective (the cause), and one
    for the ranks that wait in one, each at the user's line where it stands."""
    stuck = [r for r in records if not r.get("collective")]
    waiting = [r for r in records if r.get("collective")]
    silent = sorted(set(range(world)) - {int(r["rank"]) for r in records})
    findings = []
    for record in stuck:
        others = ", ".join(f"rank {w['rank']} in `{w['collective']}`" for w in waiting)
        message = (
            f"Rank {record['rank']} stopped making progress after step "
            f"{record['step']} outside any collective"
            + (f", while {others} waited for it" if others else "")
            + f"; the job would have hung until the collective timeout "
            f"(stacks of every thread: {record['stacks_file']})"
        )
        findings.append(_finding(record, message, int(record["rank"])))
    for record in waiting:
        cause = (
            ", ".join(f"rank {s['rank']}" for s in stuck)
            if stuck
            else ", ".join(f"rank {r}" for r in silent) or "a rank that never arrived"
        )
        message = (
            f"Rank {record['rank']} waited {record['waited_s']:.0f} s in "
            f"`{record['collective']}` after step {record['step']}, for {cause}: "
            "the job hung at this collective "
            f"(stacks of every thread: {record['stacks_file']})"
        )
        findings.append(_finding(record, message, int(record["rank"])))
    return findings


def _finding(record: dict[str, Any], message: str, rank: int) -> Finding:
    location = Location(
        path=record.get("path"),
        line=record.get("line"),
        object=record.get("collective") or f"rank {rank}",
    )
    item = finding(
        "TD813",
        message,
        location,
        Depth.RUN,
        fix_hint="Make every rank call the same collectives in the same order: look at the "
        "line where the stuck rank stands (a rank-dependent branch, a loop of "
        "different length, an exception caught on one rank).",
        evidence={
            k: record.get(k)
            for k in ("rank", "step", "collective", "waited_s", "stack", "stacks_file")
        },
    )
    from dataclasses import replace

    return replace(item, ranks=(rank,))
