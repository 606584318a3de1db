#!/usr/bin/env bash
# GPU smoke test of the memory forecast (`torchdoctor check --forecast cuda`): the peak it
# predicts from fake tensors against `torch.cuda.max_memory_allocated()` for the same step.
#
#   For the benchmark models of benchmarks/bench_check.py (an MLP, a ResNet-18-sized CNN, a
#   Transformer encoder, a nanoGPT-sized GPT with AdamW), one warm-up step creates the
#   optimizer's state; then the peak statistics are reset and one more step (forward, loss,
#   backward, optimizer step, after zero_grad(set_to_none=True)) is measured. The forecast
#   must be within 10% of it. The peak counts what was alive before the step too (weights,
#   optimizer state, batch), as the forecast does, and cuBLAS's workspace, which the
#   forecast does not (a few MiB).
#
# Run from the repository root: scripts/gpu_smoke_forecast.sh  (exits 0 with SKIP without CUDA)
set -euo pipefail
cd "$(dirname "$0")/.."

python - <<'PY'
import sys

import torch

if not torch.cuda.is_available():
    print("SKIP: gpu_smoke_forecast needs a CUDA device")
    sys.exit(0)

sys.path.insert(0, "benchmarks")
from bench_check import memory_setups  # noqa: E402

from torchdoctor.preflight.batch import move_to, split_batch  # noqa: E402
from torchdoctor.preflight.forecast import ForecastOptions, forecast_memory  # noqa: E402

failures = []
BATCH = {"MLP": 256, "ResNet-18 CNN": 64, "Transformer": 64, "GPT (nanoGPT char)": 32}
for name, make in memory_setups().items():
    batch_size = BATCH[name]
    torch.manual_seed(0)
    model, data, loss_fn, optimizer = make(batch_size)
    forecast = forecast_memory(model, optimizer, loss_fn, split_batch(data),
                               ForecastOptions("cuda", (batch_size,), remedies=False))
    if forecast.error:
        failures.append(name)
        print(f"FAIL {name}: {forecast.error}")
        continue
    predicted = forecast.points[0].peak_bytes
    model.cuda()
    optimizer = type(optimizer)(model.parameters(), **{
        k: v for k, v in optimizer.defaults.items() if k in ("lr", "momentum", "weight_decay")})
    inputs, targets = move_to(data, "cuda")

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss_fn(model(inputs), targets).backward()
        optimizer.step()

    step()
    optimizer.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    step()
    torch.cuda.synchronize()
    measured = torch.cuda.max_memory_allocated()
    error = (predicted - measured) / measured
    ok = abs(error) <= 0.10
    print(f"{'ok  ' if ok else 'FAIL'} {name:20s} batch {batch_size:4d}  measured "
          f"{measured / 2**20:9.1f} MiB  forecast {predicted / 2**20:9.1f} MiB  "
          f"error {error:+.1%}")
    if not ok:
        failures.append(name)
    del model, optimizer, inputs, targets
    torch.cuda.empty_cache()

if failures:
    print(f"gpu_smoke_forecast: {len(failures)} model(s) off by more than 10%: {failures}")
    sys.exit(1)
print("gpu_smoke_forecast: all within 10%")
PY
