"""Facts about the environment that change how a training run behaves.

:func:`facts` reads versions, devices, thread settings, the process's torch flags and the
relevant environment variables into one frozen :class:`EnvFacts`. It only reads: it sets
no flag, starts no process and never fixes the multiprocessing start method. Package
versions come from installed metadata, so no optional library is imported.

Process-wide torch settings (default dtype, anomaly mode, cuDNN flags, deterministic
algorithms) are whatever the *calling process* has set: called inside a training script,
they are the script's; from the ``torchdoctor env`` command they are torch's defaults.
"""

from __future__ import annotations

import importlib.metadata
import multiprocessing
import os
import platform
from dataclasses import dataclass
from typing import Any

from torchdoctor.env.cpus import usable_cpus

__all__ = ["DeviceInfo", "EnvFacts", "PACKAGES", "facts"]

PACKAGES = (
    "torch",
    "torchvision",
    "torchaudio",
    "lightning",
    "pytorch-lightning",
    "transformers",
    "accelerate",
    "deepspeed",
    "timm",
    "triton",
    "numpy",
    "safetensors",
    "torchdoctor",
)
_VARIABLE_PREFIXES = (
    "CUDA_",
    "NCCL_",
    "GLOO_",
    "TORCH_",
    "PYTORCH_",
    "OMP_",
    "MKL_",
    "KMP_",
    "CUBLAS_",
    "NVIDIA_TF32",
    "LOCAL_WORLD_SIZE",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "RANK",
    "MASTER_ADDR",
    "MASTER_PORT",
)
# Never copy anything that may be a credential into a report meant for bug trackers.
_SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "KEY", "CREDENTIAL")


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    """One CUDA device: index, name, compute capability, total memory in bytes."""

    index: int
    name: str
    capability: str
    memory: int


@dataclass(frozen=True, slots=True)
class EnvFacts:
    """The environment of a training process, as plain data.

    ``None`` means "not applicable or unknown" (for example every torch field when torch
    is not installed).

    Attributes:
        python: Python version.
        platform: operating system and machine.
        torch: torch version.
        torch_cuda: CUDA version torch was built with (``None`` on CPU-only builds).
        cudnn: cuDNN version torch loaded.
        cuda_available: torch can use at least one CUDA device.
        devices: the CUDA devices torch sees.
        mps_available: Apple's Metal backend is usable.
        cpu_count: logical CPUs of the machine.
        usable_cpus: CPUs this process may run on: its affinity, capped by a cgroup CPU
            quota (containers).
        intra_op_threads: ``torch.get_num_threads()``.
        inter_op_threads: ``torch.get_num_interop_threads()``.
        start_method: the multiprocessing start method set by the program, or ``None``.
        default_start_method: the platform's default start method.
        cudnn_enabled: ``torch.backends.cudnn.enabled``.
        cudnn_benchmark: ``torch.backends.cudnn.benchmark``.
        cudnn_deterministic: ``torch.backends.cudnn.deterministic``.
        deterministic_algorithms: ``torch.are_deterministic_algorithms_enabled()``.
        matmul_tf32: ``torch.backends.cuda.matmul.allow_tf32``.
        cudnn_tf32: ``torch.backends.cudnn.allow_tf32``.
        float32_matmul_precision: ``torch.get_float32_matmul_precision()``.
        default_dtype: ``torch.get_default_dtype()``, e.g. ``"float32"``.
        anomaly_detection: ``torch.is_anomaly_enabled()``.
        variables: relevant environment variables that are set, ``(name, value)``.
        packages: installed versions of torch-related packages, ``(name, version)``.
    """

    python: str
    platform: str
    torch: str | None = None
    torch_cuda: str | None = None
    cudnn: int | None = None
    cuda_available: bool = False
    devices: tuple[DeviceInfo, ...] = ()
    mps_available: bool = False
    cpu_count: int | None = None
    usable_cpus: int | None = None
    intra_op_threads: int | None = None
    inter_op_threads: int | None = None
    start_method: str | None = None
    default_start_method: str | None = None
    cudnn_enabled: bool | None = None
    cudnn_benchmark: bool | None = None
    cudnn_deterministic: bool | None = None
    deterministic_algorithms: bool | None = None
    matmul_tf32: bool | None = None
    cudnn_tf32: bool | None = None
    float32_matmul_precision: str | None = None
    default_dtype: str | None = None
    anomaly_detection: bool | None = None
    variables: tuple[tuple[str, str], ...] = ()
    packages: tuple[tuple[str, str], ...] = ()

    def variable(self, name: str) -> str | None:
        """The value of one recorded environment variable, or ``None`` when unset."""
        return dict(self.variables).get(name)


def facts() -> EnvFacts:
    """Read the current process's environment. Imports torch if it is installed.

    On a machine with CUDA, reading the device properties initialises CUDA in the calling
    process, as any ``torch.cuda`` query does.
    """
    base: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": f"{platform.system()} {platform.release()} {platform.machine()}",
        "cpu_count": os.cpu_count(),
        "usable_cpus": usable_cpus(),
        "start_method": multiprocessing.get_start_method(allow_none=True),
        "default_start_method": multiprocessing.get_all_start_methods()[0],
        "variables": _variables(),
        "packages": _packages(),
    }
    torch = _torch_or_none()
    if torch is not None:
        base.update(_torch_facts(torch))
    return EnvFacts(**base)


def _torch_or_none() -> Any:
    try:
        import torch
    except ImportError:  # env facts are useful without torch too: "torch not installed"
        return None
    return torch


def _torch_facts(torch: Any) -> dict[str, Any]:
    backends = torch.backends
    cuda = torch.cuda.is_available()
    return {
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "cudnn": backends.cudnn.version() if backends.cudnn.is_available() else None,
        "cuda_available": cuda,
        "devices": _devices(torch) if cuda else (),
        "mps_available": bool(getattr(backends, "mps", None) and backends.mps.is_available()),
        "intra_op_threads": torch.get_num_threads(),
        "inter_op_threads": torch.get_num_interop_threads(),
        "cudnn_enabled": bool(backends.cudnn.enabled),
        "cudnn_benchmark": bool(backends.cudnn.benchmark),
        "cudnn_deterministic": bool(backends.cudnn.deterministic),
        "deterministic_algorithms": bool(torch.are_deterministic_algorithms_enabled()),
        "matmul_tf32": bool(backends.cuda.matmul.allow_tf32),
        "cudnn_tf32": bool(backends.cudnn.allow_tf32),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "default_dtype": str(torch.get_default_dtype()).removeprefix("torch."),
        "anomaly_detection": bool(torch.is_anomaly_enabled()),
    }


def _devices(torch: Any) -> tuple[DeviceInfo, ...]:
    found = []
    for index in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(index)
        found.append(
            DeviceInfo(index, props.name, f"{props.major}.{props.minor}", int(props.total_memory))
        )
    return tuple(found)


def _variables() -> tuple[tuple[str, str], ...]:
    return tuple(
        sorted(
            (name, value)
            for name, value in os.environ.items()
            if name.startswith(_VARIABLE_PREFIXES)
            and not any(word in name.upper() for word in _SECRET_WORDS)
        )
    )


def _packages() -> tuple[tuple[str, str], ...]:
    found = []
    for name in PACKAGES:
        try:
            found.append((name, importlib.metadata.version(name)))
        except importlib.metadata.PackageNotFoundError:
            continue
    return tuple(found)
