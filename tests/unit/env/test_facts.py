"""torchdoctor.env.facts(): a typed, read-only record of this process's environment."""

from __future__ import annotations

import dataclasses
import json
import multiprocessing

import pytest

from torchdoctor.env import EnvFacts, diagnose, facts, facts_to_dict

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.needs_torch


def test_facts_are_a_frozen_record_of_this_process() -> None:
    env = facts()
    assert isinstance(env, EnvFacts)
    with pytest.raises(dataclasses.FrozenInstanceError):
        env.torch = "0"  # type: ignore[misc]
    assert env.torch == torch.__version__
    assert env.intra_op_threads == torch.get_num_threads()
    assert env.default_dtype == "float32"
    assert dict(env.packages)["torch"] == torch.__version__


def test_in_process_settings_are_seen() -> None:
    torch.set_default_dtype(torch.float64)
    try:
        assert facts().default_dtype == "float64"
    finally:
        torch.set_default_dtype(torch.float32)


def test_relevant_variables_are_kept_and_secrets_are_not(monkeypatch) -> None:
    monkeypatch.setenv("NCCL_DEBUG", "INFO")
    monkeypatch.setenv("TORCH_HUB_TOKEN", "hunter2")
    monkeypatch.setenv("UNRELATED_SETTING", "x")
    env = facts()
    assert env.variable("NCCL_DEBUG") == "INFO"
    assert env.variable("TORCH_HUB_TOKEN") is None
    assert env.variable("UNRELATED_SETTING") is None
    assert "hunter2" not in json.dumps(facts_to_dict(env))


def test_reading_facts_does_not_fix_the_start_method() -> None:
    before = multiprocessing.get_start_method(allow_none=True)
    facts()
    assert multiprocessing.get_start_method(allow_none=True) == before


def test_report_carries_json_ready_facts() -> None:
    report = diagnose()
    data = report.facts["environment"]
    assert json.loads(json.dumps(data)) == data
    assert isinstance(data["variables"], dict) and isinstance(data["devices"], list)
