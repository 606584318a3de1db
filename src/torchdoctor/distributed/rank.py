"""One rank of a job started by ``torchdoctor run --nproc-per-node N``.

``torch.distributed.run`` starts ``python -m torchdoctor.distributed.rank TARGET [ARGS]``
once per rank. The rank runs the script under its own monitor (following the processes it
starts), writes its report as a part for the launching ``torchdoctor run`` to merge, prints
nothing of its own, and exits with the script's status.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    """Run one rank; returns the script's exit status."""
    from torchdoctor.distributed.job import RANK_ENV, run_followed
    from torchdoctor.rules.selection import Selection
    from torchdoctor.runtime.children import write_part

    if not argv:
        print("usage: python -m torchdoctor.distributed.rank TARGET [ARGS]...", file=sys.stderr)
        return 2
    settings = json.loads(os.environ.pop(RANK_ENV, "{}") or "{}")
    target, args = argv[0], argv[1:]
    result = run_followed(
        target,
        args,
        follow=bool(settings.get("follow", True)),
        module=bool(settings.get("module")),
        max_steps=settings.get("max_steps"),
        sample_every=settings.get("sample_every"),
        status=False,
        localise_non_finite=bool(settings.get("localise_non_finite")),
        selection=Selection(
            tuple(settings.get("select") or ("TD",)), tuple(settings.get("ignore") or ())
        ),
    )
    rank = int(os.environ.get("RANK", "0"))
    result.report.facts.setdefault("rank", rank)
    result.report.facts.setdefault("world_size", int(os.environ.get("WORLD_SIZE", "1")))
    if settings.get("parts"):
        write_part(Path(settings["parts"]), result.report, rank)
    return int(result.exit_status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
