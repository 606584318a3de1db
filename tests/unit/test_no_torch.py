"""`import torchdoctor`, the CLI, lint and the renderers work without torch."""

from __future__ import annotations

import subprocess
import sys
import textwrap

# Run in a fresh interpreter where importing torch fails, as on a machine without it.
_BLOCK_TORCH = textwrap.dedent(
    """
    import sys
    class _Block:
        def find_spec(self, name, path=None, target=None):
            if name == "torch" or name.startswith("torch.") or name == "numpy":
                raise ImportError(f"blocked {name}")
            return None
    sys.meta_path.insert(0, _Block())
    """
)


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _BLOCK_TORCH + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_import_and_cli_start_without_torch() -> None:
    result = _run(
        """
        import torchdoctor
        from torchdoctor.cli import main
        try:
            main(["rules"], standalone_mode=False)
        finally:
            assert "torch" not in sys.modules
        """
    )
    assert result.returncode == 0, result.stderr
    assert "TD201" in result.stdout


def test_torch_commands_say_clearly_that_torch_is_missing() -> None:
    result = _run(
        """
        from torchdoctor._torch import require_torch
        from torchdoctor.errors import TorchMissingError
        try:
            require_torch("torchdoctor check")
        except TorchMissingError as error:
            print(error)
        """
    )
    assert "torchdoctor check needs PyTorch" in result.stdout
