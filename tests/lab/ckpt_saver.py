"""Run one lab file's ``save_checkpoint`` in a process of its own, then leave at once.

``python -m tests.lab.ckpt_saver LAB_FILE TARGET``. Used by :mod:`tests.lab.test_lab_ckpt`
for programs that start a ``torch.distributed`` process group: a gloo group torn down
while the GIL is held (a DDP ``Reducer`` freed after ``destroy_process_group()``, maybe
much later by the garbage collector, in another test) can deadlock joining its worker
threads. Here the checkpoint is written and closed, and the process exits with
``os._exit`` before any teardown runs.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path


def main(lab_file: str, target: str) -> None:
    import torch

    from tests.lab.labkit import load_module
    from tests.unit.ckpt.simulate import saved_on_cuda

    module = load_module(Path(lab_file))
    device = getattr(module, "LAB_SAVED_ON", None)
    simulate = device is not None and not torch.cuda.is_available()
    with saved_on_cuda(device) if simulate else contextlib.nullcontext():
        module.save_checkpoint(target)


if __name__ == "__main__":
    try:
        main(sys.argv[1], sys.argv[2])
    except BaseException as error:  # report it, then leave without teardown either way
        print(f"{type(error).__name__}: {error}", file=sys.stderr, flush=True)
        os._exit(1)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
