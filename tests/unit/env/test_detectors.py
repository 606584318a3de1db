"""Every env detector, on constructed facts: what it must report, what it must not."""

from __future__ import annotations

import dataclasses

import pytest

from torchdoctor.env import EnvFacts, diagnose

BASE = EnvFacts(
    python="3.11.0",
    platform="Linux",
    torch="2.5.0",
    cpu_count=8,
    usable_cpus=8,
    intra_op_threads=8,
    default_dtype="float32",
    anomaly_detection=False,
    cudnn_benchmark=False,
    cudnn_deterministic=False,
)


def env(variables: dict[str, str] | None = None, **changes: object) -> EnvFacts:
    return dataclasses.replace(BASE, variables=tuple((variables or {}).items()), **changes)


POSITIVE = {
    "launch blocking": (env({"CUDA_LAUNCH_BLOCKING": "1"}), "TD010"),
    "threads over cpus": (env(intra_op_threads=32), "TD011"),
    "threads over a cgroup quota": (env(usable_cpus=2), "TD011"),
    "ranks share the cpus": (env({"LOCAL_WORLD_SIZE": "4"}, intra_op_threads=4), "TD011"),
    "omp set after import": (env({"OMP_NUM_THREADS": "1"}), "TD012"),
    "mkl overrides omp": (env({"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "8"}), "TD012"),
    "float64 default": (env(default_dtype="float64"), "TD013"),
    "bfloat16 default": (env(default_dtype="bfloat16"), "TD013"),
    "distributed detail": (env({"TORCH_DISTRIBUTED_DEBUG": "DETAIL"}), "TD014"),
    "no caching allocator": (env({"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}), "TD014"),
    "anomaly mode": (env(anomaly_detection=True), "TD015"),
    "benchmark and deterministic": (env(cudnn_benchmark=True, cudnn_deterministic=True), "TD705"),
}
NEGATIVE = {
    "launch blocking unset": (env(), "TD010"),
    "launch blocking zero": (env({"CUDA_LAUNCH_BLOCKING": "0"}), "TD010"),
    "threads equal cpus": (env(), "TD011"),
    "pinned ranks do not share": (
        env({"LOCAL_WORLD_SIZE": "4"}, usable_cpus=2, intra_op_threads=2),
        "TD011",
    ),
    "cpus unknown": (env(usable_cpus=None, intra_op_threads=64), "TD011"),
    "omp above the cores is capped": (env({"OMP_NUM_THREADS": "64"}), "TD012"),
    "omp agrees": (env({"OMP_NUM_THREADS": "8", "MKL_NUM_THREADS": "8"}), "TD012"),
    "omp not a number": (env({"OMP_NUM_THREADS": "auto"}), "TD012"),
    "float32 default": (env(), "TD013"),
    "no torch": (env(default_dtype=None, intra_op_threads=None), "TD013"),
    "distributed info": (env({"TORCH_DISTRIBUTED_DEBUG": "INFO"}), "TD014"),
    "nccl info logs": (env({"NCCL_DEBUG": "INFO"}), "TD014"),
    "caching allocator on": (env({"PYTORCH_NO_CUDA_MEMORY_CACHING": "0"}), "TD014"),
    "anomaly off": (env(), "TD015"),
    "benchmark alone": (env(cudnn_benchmark=True), "TD705"),
    "deterministic alone": (env(cudnn_deterministic=True), "TD705"),
}


@pytest.mark.parametrize("facts, code", POSITIVE.values(), ids=POSITIVE.keys())
def test_reports_the_setting(facts, code) -> None:
    hits = diagnose(facts).by_code(code)
    assert len(hits) == 1, [f.message for f in diagnose(facts)]
    assert hits[0].location.object and hits[0].fix_hint


@pytest.mark.parametrize("facts, code", NEGATIVE.values(), ids=NEGATIVE.keys())
def test_stays_quiet(facts, code) -> None:
    assert code not in diagnose(facts).codes()


def test_a_clean_environment_has_no_findings() -> None:
    assert len(diagnose(env())) == 0


def test_messages_name_the_variable_and_the_numbers() -> None:
    (omp,) = diagnose(env({"OMP_NUM_THREADS": "1"}, intra_op_threads=8)).by_code("TD012")
    assert "OMP_NUM_THREADS=1" in omp.message and "torch runs 8" in omp.message
    (mkl,) = diagnose(env({"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "8"})).by_code("TD012")
    assert "MKL_NUM_THREADS=8 takes precedence" in mkl.message
    (quota,) = diagnose(env(usable_cpus=2)).by_code("TD011")
    assert "8 intra-op threads" in quota.message and "may use 2 CPUs" in quota.message
    assert "set_num_threads(2)" in quota.fix_hint
