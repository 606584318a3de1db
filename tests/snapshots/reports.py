"""One fixed, rich lint report for renderer snapshots, and a snapshot extension that keeps
the rendered files under ``tests/snapshots/__snapshots__/`` as plain text to review."""

from __future__ import annotations

from pathlib import Path

from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

from torchdoctor.findings import (
    Applicability,
    Confidence,
    Depth,
    Edit,
    Fix,
    Location,
    Report,
    Severity,
)
from torchdoctor.rules.registry import finding

ROOT = "/work/repo"
SNAPSHOTS = Path(__file__).resolve().parent / "__snapshots__"


class TextSnapshot(SingleFileSnapshotExtension):
    """A whole rendered output per snapshot file, stored as UTF-8 text."""

    _write_mode = WriteMode.TEXT
    file_extension = "txt"

    @classmethod
    def dirname(cls, *, test_location: object) -> str:
        module = Path(getattr(test_location, "filepath", "unknown")).stem
        return str(SNAPSHOTS / module)


def rich_report() -> Report:
    """Findings of every severity, with and without files, fixes, evidence and odd text."""
    report = Report(tool_version="0.1.0", command="lint", created="2026-01-01T00:00:00+00:00")
    report.add(
        finding(
            "TD203",
            "`optimizer.zero_grad()` at line 31 runs after `loss.backward()` (line 30) and before "
            "`optimizer.step()` (line 32): the step sees zeroed gradients, so the model never "
            "learns",
            Location(
                path=f"{ROOT}/train.py",
                line=31,
                column=8,
                end_line=31,
                end_column=29,
                snippet="        optimizer.zero_grad()",
            ),
            Depth.LINT,
            fix_hint="Move `optimizer.zero_grad()` to the top of the loop body.",
            evidence={"backward_line": 30, "step_line": 32},
            fix=Fix(
                "Move `optimizer.zero_grad()` to the top of the loop",
                (Edit(27, 8, 27, 8, "optimizer.zero_grad()\n        "), Edit(31, 0, 32, 0, "")),
                Applicability.UNSAFE,
            ),
        )
    )
    report.add(
        finding(
            "TD202",
            "`loss.backward()` at line 12 runs under `torch.no_grad()` (line 9), and the "
            "loss was computed under it too",
            Location(
                path="src/steps, v2/step.py", line=12, column=4, snippet="    loss.backward()"
            ),
            Depth.LINT,
            fix_hint="Move the forward pass and `backward()` out of `no_grad`.",
        )
    )
    report.add(
        finding(
            "TD206",
            "`model.forward(...)` at line 7 calls the module's forward directly: 50% "
            "of hooks\nskip, a:b",
            Location(
                path=f"{ROOT}/models/net.py",
                line=7,
                column=10,
                end_line=7,
                end_column=23,
                snippet="    out = model.forward(x)",
            ),
            Depth.LINT,
            fix_hint="Call the module: `model(...)`.",
            confidence=Confidence.MEDIUM,
            fix=Fix("Call `model(...)`", (Edit(7, 10, 7, 23, "model"),), Applicability.UNSAFE),
        )
    )
    report.add(
        finding(
            "TD207",
            "`encoder.weight` is changed through `.data` between forward and backward",
            Location(object="encoder.weight"),
            Depth.LINT,
            severity=Severity.INFO,
            fix_hint="Use `torch.no_grad()` and no `.data`.",
        )
    )
    report.add(
        finding(
            "TD002",
            "train_old.py:3 is not valid Python: an unresolved merge-conflict marker",
            Location(path=f"{ROOT}/train_old.py", line=3, column=0, snippet="<<<<<<< HEAD"),
            Depth.LINT,
            fix_hint="Fix the syntax error.",
        )
    )
    return report
