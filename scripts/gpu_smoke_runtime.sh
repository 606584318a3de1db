#!/usr/bin/env bash
# GPU smoke test of the runtime monitor (torchdoctor run / watch) on one CUDA device.
#
# Checks what CPU tests cannot: the pinned, event-based read-back of losses and statistics,
# CUDA allocator facts (allocated, reserved, peak), host-device synchronisations counted per
# step, memory growth measured with the CUDA allocator, and that a watched run leaves the
# training results bitwise identical on the GPU too. Exits non-zero on the first failure.
# Usage: scripts/gpu_smoke_runtime.sh   (from the repository root, in the project's env)
set -euo pipefail

python - <<'PY'
import sys

import torch

import torchdoctor

if not torch.cuda.is_available():
    print("gpu_smoke_runtime: no CUDA device; nothing to check")
    sys.exit(0)

device = torch.device("cuda")


def train(steps, *, leak=None, sync_every_step=False, clear=True):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(),
                                torch.nn.Dropout(0.1), torch.nn.Linear(512, 10)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    losses = []
    for _ in range(steps):
        x = torch.randn(128, 256, device=device)
        y = torch.randint(0, 10, (128,), device=device)
        if clear:
            optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
        if sync_every_step:
            loss.item()
        if leak is not None:
            leak.append(torch.empty(4 * 1024 * 1024, device=device))  # 16 MiB per step
    return torch.stack(losses).cpu(), [p.detach().cpu() for p in model.parameters()]


failures = []

# 1. Results are bitwise identical with and without the monitor.
plain_losses, plain_params = train(60)
with torchdoctor.watch(sample_every=1, localise_non_finite=True) as w:
    losses, params = train(60, sync_every_step=True)
if not torch.equal(losses, plain_losses) or not all(
        torch.equal(a, b) for a, b in zip(params, plain_params)):
    failures.append("watched CUDA run differs from the plain run")

# 2. CUDA facts, syncs per step, loss read-back through pinned memory and events.
report = w.report
cuda = report.facts.get("cuda", {})
for key in ("allocated_mib", "reserved_mib", "peak_allocated_mib"):
    if key not in cuda:
        failures.append(f"missing CUDA fact {key}: {report.facts}")
if report.facts.get("cuda_syncs_per_step", 0) < 1:
    failures.append(f"syncs per step not counted: {report.facts.get('cuda_syncs_per_step')}")
if len(report.series.get("loss", [])) != 60:
    failures.append(f"loss series has {len(report.series.get('loss', []))} values, not 60")
if report.by_code("TD001"):
    failures.append("internal errors: " + "; ".join(f.message for f in report.by_code("TD001")))

# 3. Growth of CUDA allocated memory is found; a healthy run is quiet.
with torchdoctor.watch(sample_every=2) as w:
    train(80, leak=[])
if not w.report.by_code("TD706"):
    failures.append("CUDA memory growth not found")
with torchdoctor.watch() as w:
    train(80)
if w.report.by_code("TD706") or w.report.by_code("TD001"):
    failures.append("healthy CUDA run flagged: " + ", ".join(sorted(w.report.codes())))

# 4. Uncleared gradients are found on the GPU too (read-back is deferred there).
with torchdoctor.watch() as w:
    train(40, clear=False)
if not w.report.by_code("TD201"):
    failures.append("TD201 not found on CUDA")

if failures:
    print("gpu_smoke_runtime: FAILED")
    for failure in failures:
        print("  -", failure)
    sys.exit(1)
print("gpu_smoke_runtime: ok", cuda)
PY
