#!/usr/bin/env bash
# GPU smoke test of `torchdoctor check`: what a CPU-only CI cannot show.
#
#   1. a real device mismatch (a tensor created on the CPU inside forward, model on CUDA)
#      is reported as TD101 instead of crashing the check; the fixed lab file is quiet;
#   2. a model left on the CPU while batches go to CUDA is TD101;
#   3. out-of-range class indices are TD403 *before* the loss runs, so no device-side
#      assert poisons the CUDA context (CUDA still works afterwards);
#   4. check leaves a CUDA model, its optimizer and the CUDA RNG bitwise as it found them.
#
# Run from the repository root: scripts/gpu_smoke_check.sh  (exits 0 with SKIP without CUDA)
set -euo pipefail
cd "$(dirname "$0")/.."

python - <<'PY'
import sys

import torch

if not torch.cuda.is_available():
    print("SKIP: gpu_smoke_check needs a CUDA device")
    sys.exit(0)

from torch import nn

import torchdoctor
from tests.lab import labkit
from torchdoctor.preflight.factory import CheckTarget
from torchdoctor.preflight.snapshot import Snapshot, state_differences

failures = []


def expect(condition, what):
    print(("ok   " if condition else "FAIL ") + what)
    if not condition:
        failures.append(what)


def lab_report(folder, kind, **options):
    module = labkit.load_module(labkit.LAB / folder / f"{kind}.py")
    return CheckTarget.from_result(module.make()).check(**options)


# 1. real mismatch on the GPU
buggy = lab_report("TD101-device-mismatch", "buggy", select=["TD1"])
td101 = buggy.by_code("TD101")
expect(bool(td101) and td101[0].severity.value == "error",
       f"TD101 lab on CUDA reported as an error: {[f.message for f in td101]}")
expect(any(f.location.path and f.location.path.endswith("buggy.py") for f in td101),
       "TD101 points into buggy.py")
fixed = lab_report("TD101-device-mismatch", "fixed")
expect(not fixed.by_code("TD101"), "TD101 fixed lab on CUDA is quiet")

# 2. model not moved
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
batch = (torch.randn(32, 8), torch.randint(0, 3, (32,)))
report = torchdoctor.check(model, batch, nn.CrossEntropyLoss(), device="cuda", select=["TD1"])
expect("Batches go to cuda" in " ".join(f.message for f in report.by_code("TD101")),
       "model on CPU with device='cuda' is TD101")

# 3. out-of-range labels do not trigger a device-side assert
cuda_model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3)).cuda()
report = torchdoctor.check(cuda_model, (batch[0].cuda(), (batch[1] + 1).cuda()),
                           nn.CrossEntropyLoss())
expect(bool(report.by_code("TD403")), "TD403 reported on CUDA")
torch.cuda.synchronize()
expect(float((torch.ones(2, device="cuda") + 1).sum()) == 4.0, "CUDA still usable after TD403")

# 4. state restored bitwise, CUDA RNG included
optimizer = torch.optim.Adam(cuda_model.parameters(), lr=1e-3)
loss = nn.CrossEntropyLoss()(cuda_model(batch[0].cuda()), batch[1].cuda())
loss.backward()
optimizer.step()
torch.cuda.manual_seed_all(7)
torch.rand(3, device="cuda")
before = Snapshot(cuda_model, optimizer)
torchdoctor.check(cuda_model, (batch[0].cuda(), batch[1].cuda()), nn.CrossEntropyLoss(),
                  optimizer)
differences = state_differences(before, Snapshot(cuda_model, optimizer))
expect(not differences, f"CUDA state restored {differences}")

if failures:
    print(f"{len(failures)} GPU smoke check(s) failed")
    sys.exit(1)
print("gpu_smoke_check: all passed")
PY
