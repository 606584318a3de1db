"""Detectors of the ``env`` depth: each reads an :class:`EnvFacts` and reports through its
:class:`~torchdoctor._kernel.Reporter`.

Only settings that change a training run's speed or results are findings; everything else
(versions, devices, TF32 flags, start method) is a fact in the report.
"""

from __future__ import annotations

from torchdoctor._kernel import Reporter
from torchdoctor.env.facts import EnvFacts
from torchdoctor.findings import Confidence, Depth, Location
from torchdoctor.rules.detectors import detector
from torchdoctor.rules.registry import finding

__all__ = ["requested_threads"]

ENV = Depth.ENV
_THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


def _at(thing: str) -> Location:
    return Location(object=thing)


@detector("TD010", depth=ENV)
def cuda_launch_blocking_set(env: EnvFacts, out: Reporter) -> None:
    """``CUDA_LAUNCH_BLOCKING`` is set to something other than 0."""
    value = env.variable("CUDA_LAUNCH_BLOCKING")
    if value is None or value.strip() in ("", "0"):
        return
    effect = (
        "every CUDA kernel launch waits for the GPU to finish it"
        if env.cuda_available
        else "no effect on this machine (no CUDA), but every CUDA run that inherits it "
        "waits for each kernel to finish"
    )
    out.emit(
        finding(
            "TD010",
            f"CUDA_LAUNCH_BLOCKING={value}: {effect}, so the CPU can no longer queue work ahead "
            "of the GPU. It is a debugging switch for locating the kernel behind an "
            "asynchronous CUDA error.",
            _at("CUDA_LAUNCH_BLOCKING"),
            ENV,
            fix_hint="Unset CUDA_LAUNCH_BLOCKING (remove it from the script, the shell profile "
            "or the job file) once the failing kernel is found.",
            evidence={"value": value},
        )
    )


@detector("TD011", depth=ENV)
def threads_oversubscribe_cores(env: EnvFacts, out: Reporter) -> None:
    """More intra-op threads (times local processes) than CPUs the process may use."""
    threads, cpus = env.intra_op_threads, env.usable_cpus
    if threads is None or not cpus:
        return
    processes = _processes_sharing_cpus(env)
    if threads * processes <= cpus:
        return
    sharing = f" x {processes} processes on this node (LOCAL_WORLD_SIZE)" if processes > 1 else ""
    out.emit(
        finding(
            "TD011",
            f"torch runs {threads} intra-op threads{sharing} but this process may use {cpus} "
            f"CPUs (affinity and cgroup quota, of {env.cpu_count} on the machine): the threads "
            "wait for each other and for the CPU, and every parallel op gets slower.",
            _at("torch.get_num_threads()"),
            ENV,
            fix_hint=f"Use at most {max(1, cpus // processes)} threads per process: "
            f"`torch.set_num_threads({max(1, cpus // processes)})`, or set "
            "OMP_NUM_THREADS before the process starts.",
            evidence={"threads": threads, "usable_cpus": cpus, "processes": processes},
        )
    )


def _processes_sharing_cpus(env: EnvFacts) -> int:
    # Ranks pinned to their own CPUs (affinity below the machine's count) do not share.
    if env.cpu_count and env.usable_cpus and env.usable_cpus < env.cpu_count:
        return 1
    try:
        return max(1, int(env.variable("LOCAL_WORLD_SIZE") or 1))
    except ValueError:
        return 1


def requested_threads(env: EnvFacts) -> dict[str, int]:
    """The thread counts OMP_NUM_THREADS / MKL_NUM_THREADS ask for, where set and valid."""
    found = {}
    for name in _THREAD_VARIABLES:
        value = (env.variable(name) or "").split(",")[0].strip()  # OpenMP allows "4,2"
        if value.isdigit() and int(value) > 0:
            found[name] = int(value)
    return found


@detector("TD012", depth=ENV)
def thread_variable_ignored(env: EnvFacts, out: Reporter) -> None:
    """torch uses more threads than OMP_NUM_THREADS / MKL_NUM_THREADS ask for."""
    requested = requested_threads(env)
    threads = env.intra_op_threads
    if not requested or threads is None:
        return
    name, wanted = min(requested.items(), key=lambda item: item[1])
    if threads <= wanted:
        return
    other = {k: v for k, v in requested.items() if k != name and v >= threads}
    cause = (
        f"{next(iter(other))}={next(iter(other.values()))} takes precedence in torch"
        if other
        else "the variable was set after torch started (torch reads it once, "
        "at import) or torch.set_num_threads() overrode it"
    )
    out.emit(
        finding(
            "TD012",
            f"{name}={env.variable(name)} asks for {wanted} thread(s) but torch runs {threads}: "
            f"{cause}. Processes meant to share the CPUs (DataLoader workers, several ranks) "
            "then compete for them.",
            _at(name),
            ENV,
            fix_hint=f"Set {name} before Python starts (in the shell or job file), or call "
            f"`torch.set_num_threads({wanted})` in the program; make "
            "OMP_NUM_THREADS and MKL_NUM_THREADS agree.",
            evidence={"variable": name, "requested": wanted, "threads": threads},
        )
    )


@detector("TD013", depth=ENV)
def default_dtype_changed(env: EnvFacts, out: Reporter) -> None:
    """``torch.set_default_dtype`` changed the default floating dtype from float32."""
    dtype = env.default_dtype
    if dtype is None or dtype == "float32":
        return
    if dtype == "float64":
        effect = (
            "every tensor and layer built without a dtype is float64: twice the "
            "memory, and 32-64x lower throughput on GPUs without full-rate FP64"
        )
    else:
        effect = (
            f"every parameter built without a dtype is {dtype}, so optimizer updates "
            "smaller than its precision are rounded away (no mixed precision master "
            "weights)"
        )
    out.emit(
        finding(
            "TD013",
            f"The default dtype is {dtype} (torch.set_default_dtype): {effect}.",
            _at("torch.get_default_dtype()"),
            ENV,
            fix_hint="Remove `torch.set_default_dtype(...)`; ask for float64 per tensor where "
            "you need it, and use torch.autocast for reduced precision.",
            evidence={"default_dtype": dtype},
        )
    )


@detector("TD015", depth=ENV)
def anomaly_detection_enabled(env: EnvFacts, out: Reporter) -> None:
    """Autograd anomaly detection is on."""
    if not env.anomaly_detection:
        return
    out.emit(
        finding(
            "TD015",
            "Autograd anomaly detection is enabled: every forward op records a traceback and "
            "every backward op checks its output for NaN (2.5x the step time of a small MLP in "
            "our measurement).",
            _at("torch.autograd.set_detect_anomaly"),
            ENV,
            fix_hint="Remove `torch.autograd.set_detect_anomaly(True)` (or the detect_anomaly "
            "context) once the NaN's origin is found.",
        )
    )


@detector("TD705", depth=ENV)
def cudnn_benchmark_with_deterministic(env: EnvFacts, out: Reporter) -> None:
    """``cudnn.benchmark`` and ``cudnn.deterministic`` are both on."""
    if not (env.cudnn_benchmark and env.cudnn_deterministic):
        return
    out.emit(
        finding(
            "TD705",
            "torch.backends.cudnn.benchmark and .deterministic are both True: benchmark mode "
            "picks convolution algorithms by timing them, so two runs can pick different ones "
            "and the reproducibility deterministic=True was set for is not guaranteed.",
            _at("torch.backends.cudnn"),
            ENV,
            fix_hint="For reproducible runs set `torch.backends.cudnn.benchmark = False`; for "
            "speed, drop `deterministic = True`.",
            confidence=Confidence.HIGH,
        )
    )
