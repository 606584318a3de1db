#!/usr/bin/env bash
# GPU smoke checks of the runtime exception explainer, warnings and torch.compile detectors
# (issue 4, items 9-11): the CUDA wordings that a CPU cannot produce. Each case raises a
# real CUDA error and checks the finding's code, place and numbers. Exits 0 with a notice
# when no CUDA device is visible; 1 when a check fails. The lead merges this into
# scripts/gpu_smoke.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

python - <<'PY'
import sys

import torch
from torch import nn

if not torch.cuda.is_available():
    print("gpu_smoke_exceptions: no CUDA device; skipped")
    sys.exit(0)

import torchdoctor
from torchdoctor.runtime.exceptions import explain_exception
from torchdoctor.runtime.exceptions.facts import DEVICE_MISMATCH_CODE

failures = []


def case(name, action, codes, *, key=None, contains=(), models=()):
    try:
        action()
    except Exception as error:  # noqa: BLE001
        found = explain_exception(error, models=models, roots=[".", "scripts"])
    else:
        failures.append(f"{name}: did not raise")
        return None
    ok = found.code in codes and (key is None or found.evidence.get("known_error") == key)
    ok = ok and all(text in found.message + found.fix_hint for text in contains)
    print(f"{'ok  ' if ok else 'FAIL'} {name}: {found.code} {found.location}\n     {found.message}\n"
          f"     fix: {found.fix_hint}")
    if not ok:
        failures.append(f"{name}: got {found.code} {dict(found.evidence)}")
    return found


cuda = torch.device("cuda")
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)).to(cuda)

case("device mismatch (input left on the CPU)", lambda: model(torch.randn(8, 16)),
     {DEVICE_MISMATCH_CODE}, key="device-mismatch", contains=("cuda",), models=(model,))

conv = nn.Conv2d(3, 8, 3).to(cuda)
case("half input, float conv weights", lambda: conv(torch.randn(2, 3, 16, 16, device=cuda).half()),
     {"TD107"}, models=(conv,))

case("absurd CUDA allocation", lambda: torch.empty(2**40, device=cuda),
     {"TD709"}, contains=("CUDA", "a tensor shape is wrong"))

total = torch.cuda.get_device_properties(0).total_memory


def fill_then_overflow():
    held = torch.empty(int(total * 0.8), dtype=torch.uint8, device=cuda)
    try:
        torch.empty(int(total * 0.3), dtype=torch.uint8, device=cuda)
    finally:
        del held


case("CUDA out of memory of capacity", fill_then_overflow, {"TD709"},
     contains=("batch size",))
torch.cuda.empty_cache()

# The monitor end to end on CUDA: a target left on the CPU.
try:
    with torchdoctor.watch() as session:
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(2):
            x, y = torch.randn(8, 16, device=cuda), torch.randint(0, 4, (8,))
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
except RuntimeError:
    codes = session.report.codes()
    print(f"{'ok  ' if DEVICE_MISMATCH_CODE in codes else 'FAIL'} watch() on CUDA: {sorted(codes)}")
    if DEVICE_MISMATCH_CODE not in codes:
        failures.append(f"watch() on CUDA: {sorted(codes)}")
else:
    failures.append("watch() on CUDA: the target on the CPU did not raise")

# torch.compile with the default inductor backend (the CPU tests use backend="eager").
from torchdoctor.runtime.detectors.compile import graph_breaks, recompilations, snapshot


def logged(x):
    y = x.sin()
    print("inside", end="\r")
    return y.cos()


def pool(x):
    return x.mean(1)


since = snapshot()
torch.compile(logged)(torch.randn(64, device=cuda))
compiled_pool = torch.compile(pool, dynamic=False)
for length in range(4, 14):
    compiled_pool(torch.randn(2, length, device=cuda))
breaks = [b for b in graph_breaks(since) if b.frame and b.frame.function == "logged"]
recompiled = [r for r in recompilations(since) if r.function == "pool"]
print(f"{'ok  ' if breaks else 'FAIL'} inductor graph break: {[b.reason for b in breaks]}")
print(f"{'ok  ' if recompiled and recompiled[0].limit_hit else 'FAIL'} inductor recompiles: "
      f"{[(r.count, r.limit) for r in recompiled]}")
if not breaks:
    failures.append("inductor graph break not found")
if not (recompiled and recompiled[0].limit_hit):
    failures.append("inductor recompilations not counted")

# Last: a device-side assert poisons the CUDA context for the rest of the process.
targets = torch.tensor([0, 1, 9], device=cuda)


def class_out_of_range():
    loss = nn.functional.cross_entropy(torch.randn(3, 4, device=cuda), targets)
    loss.item()  # the assert surfaces here, asynchronously


case("class index >= classes on CUDA", class_out_of_range, {"TD004", "TD403"},
     contains=("CUDA_LAUNCH_BLOCKING",))

if failures:
    print("gpu_smoke_exceptions FAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("gpu_smoke_exceptions: all checks passed")
PY
