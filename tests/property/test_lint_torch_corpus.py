"""Lint every ``.py`` file of the installed torch package: no crash, and a false-positive
watch. torch's sources are ~2,300 files of real, mostly correct PyTorch code; every
autograd and train/eval finding there was read and judged, and is listed in ``AUDITED``
with the verdict. A new finding of those rules is a regression to look at.
"""

from __future__ import annotations

import importlib.util
from collections import Counter
from pathlib import Path

import pytest

from torchdoctor.static import LintConfig, lint

# (code, path under the torch package) -> why the finding is right.
AUDITED: dict[tuple[str, str], str] = {
    (
        "TD201",
        "_inductor/fx_passes/numeric_utils.py",
    ): "run_model() backpropagates and steps a fresh SGD every iteration without clearing "
    ".grad: the gradients do accumulate across iterations, as the rule says",
    (
        "TD206",
        "testing/_internal/distributed/ddp_under_dist_autograd_test.py",
    ): "self.hybrid_module.forward(b) on an nn.Module: hooks are skipped (test code)",
    (
        "TD206",
        "testing/_internal/distributed/distributed_test.py",
    ): "model.forward(input) on a DistributedDataParallel: its hooks are skipped",
    (
        "TD002",
        "testing/_internal/py312_intrinsics.py",
    ): "Python 3.12 syntax (`def f[T]`), not parsable by an older interpreter",
}
WATCHED = ("TD0", "TD2", "TD5")


def torch_sources() -> Path | None:
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


@pytest.mark.slow
@pytest.mark.skipif(torch_sources() is None, reason="needs the torch package's sources")
def test_every_torch_source_lints_without_internal_error() -> None:
    root = torch_sources()
    assert root is not None
    report = lint(root, config=LintConfig())
    assert report.facts["files"] > 1000
    internal = [f"{f.location}: {f.message}" for f in report.findings if f.code == "TD001"]
    assert not internal, "\n".join(internal)
    per_rule = Counter(f.code for f in report.findings)
    print("\nfindings per rule on the torch corpus:", dict(sorted(per_rule.items())))
    watched = {
        (f.code, Path(f.location.path).resolve().relative_to(root.resolve()).as_posix())
        for f in report.findings
        if f.code.startswith(WATCHED) and f.code != "TD001" and f.location.path
    }
    unexpected = sorted(watched - set(AUDITED))
    assert not unexpected, f"new findings on torch's own code, audit them: {unexpected}"
