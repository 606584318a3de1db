#!/usr/bin/env bash
# GPU smoke test of `torchdoctor ckpt` and `torchdoctor env` on a real CUDA machine.
# The CPU test suite simulates GPU-saved checkpoints; this checks the real thing:
#   1. a state_dict saved from cuda:0 is reported (TD901) and inspected without moving to GPU;
#   2. the ckpt lab runs with real CUDA saves (the driver skips its simulation);
#   3. `torchdoctor env` sees the devices, and TD010 speaks of the real effect.
# Usage: scripts/gpu_smoke_ckpt.sh   (from the repository root, torch with CUDA installed)
set -euo pipefail
cd "$(dirname "$0")/.."

if ! python -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)"; then
    echo "gpu_smoke_ckpt: no CUDA device; skipped"
    exit 0
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

python - "$work/gpu.pt" <<'PY'
import sys, torch
assert torch.cuda.is_available(), "no CUDA device: run this on a GPU machine"
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2)).cuda()
torch.save(model.state_dict(), sys.argv[1])
PY

torchdoctor ckpt "$work/gpu.pt" --format json --fail-on never > "$work/ckpt.json"
python - "$work/ckpt.json" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
codes = [f["code"] for f in report["findings"]]
assert codes == ["TD901"], codes
assert report["facts"]["checkpoint"]["saved_from"] == {"cuda:0": 4}, report["facts"]["checkpoint"]
print("ckpt: real cuda:0 checkpoint reported as TD901")
PY

python -m pytest -q -p no:cacheprovider tests/lab/test_lab_ckpt.py tests/unit/ckpt/test_detectors.py

torchdoctor env --format json > "$work/env.json"
CUDA_LAUNCH_BLOCKING=1 torchdoctor env --format json --fail-on never > "$work/env_blocking.json"
python - "$work/env.json" "$work/env_blocking.json" <<'PY'
import json, sys
facts = json.load(open(sys.argv[1]))["facts"]["environment"]
assert facts["cuda_available"] and facts["devices"], facts
blocking = json.load(open(sys.argv[2]))["findings"]
assert [f["code"] for f in blocking] == ["TD010"], blocking
assert "every CUDA kernel launch waits" in blocking[0]["message"], blocking[0]["message"]
print(f"env: {len(facts['devices'])} device(s), {facts['devices'][0]['name']}; TD010 ok")
PY
echo "gpu_smoke_ckpt: OK"
