"""`torchdoctor env`: text and JSON output, findings, exit codes, and no torch needed."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from click.testing import CliRunner

from torchdoctor.cli import main


@pytest.mark.needs_torch
def test_text_output_lists_facts_and_says_clean(monkeypatch) -> None:
    for name in (
        "CUDA_LAUNCH_BLOCKING",
        "TORCH_DISTRIBUTED_DEBUG",
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
    ):
        monkeypatch.delenv(name, raising=False)
    result = CliRunner().invoke(main, ["env"])
    assert result.exit_code == 0, result.output
    assert "torch " in result.output and "intra-op" in result.output
    assert "No problems found." in result.output


@pytest.mark.needs_torch
def test_json_output_for_bug_reports_carries_facts_and_findings(monkeypatch) -> None:
    monkeypatch.setenv("CUDA_LAUNCH_BLOCKING", "1")
    monkeypatch.setenv("TORCH_DISTRIBUTED_DEBUG", "DETAIL")
    result = CliRunner().invoke(main, ["env", "--format", "json", "--fail-on", "warning"])
    assert result.exit_code == 1
    data = json.loads(result.output)
    assert data["command"] == "env"
    assert data["facts"]["environment"]["variables"]["CUDA_LAUNCH_BLOCKING"] == "1"
    assert {f["code"] for f in data["findings"]} == {"TD010", "TD014"}


def test_env_runs_without_torch() -> None:
    code = textwrap.dedent(
        """
        import sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name == "torch" or name.startswith("torch."):
                    raise ImportError("blocked")
        sys.meta_path.insert(0, Block())
        from torchdoctor.cli import main
        main(["env", "--format", "json"])
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    facts = json.loads(result.stdout)["facts"]["environment"]
    assert facts["torch"] is None and facts["intra_op_threads"] is None
