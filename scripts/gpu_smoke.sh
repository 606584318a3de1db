#!/usr/bin/env bash
# The GPU smoke test: every CUDA path a CPU-only CI cannot show, in one short run.
#
# Runs each depth's part (check, run, runtime exceptions, ckpt) and exits non-zero if any
# failed. Each part prints SKIP and succeeds on a machine without CUDA, so this script is
# safe to run anywhere. Usage, from anywhere: scripts/gpu_smoke.sh
set -uo pipefail
cd "$(dirname "$0")/.."

python -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(),
      torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')"

failed=()
for part in check runtime exceptions ckpt forecast; do
    echo "=== gpu_smoke_${part} ==="
    start=$SECONDS
    if timeout 240 "scripts/gpu_smoke_${part}.sh"; then
        echo "=== ${part}: ok ($((SECONDS - start)) s)"
    else
        echo "=== ${part}: FAILED ($((SECONDS - start)) s)"
        failed+=("$part")
    fi
done

if ((${#failed[@]})); then
    echo "GPU smoke failed: ${failed[*]}"
    exit 1
fi
echo "GPU smoke passed"
