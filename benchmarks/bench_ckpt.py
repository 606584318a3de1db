"""Peak memory of `torchdoctor ckpt` on a large checkpoint, next to the file's size.

Builds a checkpoint of about ``--size-mb`` MiB in a temporary directory (in a separate
process, so building it does not count), then inspects it in fresh processes:

* ``mmap``: ``torchdoctor.ckpt.diagnose`` as shipped (tensors memory-mapped);
* ``full read``: the same inspection with ``torch.load(..., mmap=False)``, what reading the
  whole file into memory costs.

For each it prints wall time, peak resident memory (RSS) and peak *private* memory
(anonymous pages: what the process allocated itself), and private memory as a share of the
file size. With mmap, RSS also counts the file's pages while they are mapped; those are
page-cache pages, shared and dropped under memory pressure, not memory the inspection
holds. The inspection reads every value (it counts NaN/Inf), so the mapped pages are all
touched; the private peak shows that the file is never copied into memory.

Usage: ``python benchmarks/bench_ckpt.py [--size-mb 1024] [--tensors 64]``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

_BUILD = textwrap.dedent(
    """
    import sys, torch
    path, size_mb, count = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
    numel = max(1, int(size_mb * 2**20 / 4 / count))
    torch.manual_seed(0)
    state = {f"blocks.{i}.weight": torch.randn(numel) for i in range(count)}
    torch.save(state, path)
    """
)

_MEASURE = textwrap.dedent(
    """
    import functools, json, sys, threading, time
    import torch

    def private_kib():
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1])
        return 0

    def rss_kib():
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    path, mode = sys.argv[1], sys.argv[2]
    if mode == "full read":
        load = torch.load

        @functools.wraps(load)
        def full_read(*args, **kwargs):
            kwargs["mmap"] = False
            return load(*args, **kwargs)

        torch.load = full_read
    import torchdoctor.ckpt as ckpt

    base_private, base_rss = private_kib(), rss_kib()
    peak = {"private": base_private, "rss": base_rss}
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak["private"] = max(peak["private"], private_kib())
            peak["rss"] = max(peak["rss"], rss_kib())
            done.wait(0.002)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    start = time.perf_counter()
    report = ckpt.diagnose(path)
    seconds = time.perf_counter() - start
    done.set()
    sampler.join()
    peak["private"] = max(peak["private"], private_kib())
    peak["rss"] = max(peak["rss"], rss_kib())
    print(json.dumps({"seconds": seconds, "mmap": report.facts["checkpoint"]["mmap"],
                      "private_mib": (peak["private"] - base_private) / 1024,
                      "rss_mib": (peak["rss"] - base_rss) / 1024,
                      "tensors": report.facts["checkpoint"]["tensor_count"]}))
    """
)


def build(path: Path, size_mb: float, tensors: int) -> None:
    """Write the checkpoint in a separate process."""
    subprocess.run(
        [sys.executable, "-c", _BUILD, str(path), str(size_mb), str(tensors)], check=True
    )


def measure(path: Path, mode: str) -> dict[str, float]:
    """Inspect ``path`` in a fresh process and return its timings and memory peaks."""
    result = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(path), mode],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--size-mb", type=float, default=1024.0, help="checkpoint size in MiB (default 1024)"
    )
    parser.add_argument("--tensors", type=int, default=64, help="number of tensors")
    parser.add_argument(
        "--skip-full-read", action="store_true", help="measure only the memory-mapped inspection"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-ckpt-") as folder:
        path = Path(folder) / "large.pt"
        started = time.perf_counter()
        build(path, args.size_mb, args.tensors)
        size_mib = path.stat().st_size / 2**20
        print(
            f"checkpoint: {size_mib:.1f} MiB on disk, {args.tensors} tensors "
            f"(built in {time.perf_counter() - started:.1f} s)"
        )
        print(
            f"{'mode':<10} {'time':>7} {'peak RSS':>12} {'peak private':>14} {'private/file':>13}"
        )
        modes = ["mmap"] if args.skip_full_read else ["mmap", "full read"]
        for mode in modes:
            row = measure(path, mode)
            print(
                f"{mode:<10} {row['seconds']:>6.2f}s {row['rss_mib']:>8.1f} MiB "
                f"{row['private_mib']:>10.1f} MiB {row['private_mib'] / size_mib:>13.3f}"
            )
        print(
            "RSS above counts mapped file pages (page cache, shared and reclaimable); "
            "private memory is what the inspection itself allocated."
        )


if __name__ == "__main__":
    main()
