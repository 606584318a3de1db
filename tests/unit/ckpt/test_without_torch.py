"""Without torch, `torchdoctor.ckpt` imports and `torchdoctor ckpt` says what is missing."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_import_and_a_clear_error_without_torch(tmp_path) -> None:
    target = tmp_path / "model.pt"
    target.write_bytes(b"PK\x03\x04 not really a zip")
    code = textwrap.dedent(
        f"""
        import sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name == "torch" or name.startswith("torch."):
                    raise ImportError("blocked")
        sys.meta_path.insert(0, Block())
        import torchdoctor.ckpt, torchdoctor.env
        assert "torch" not in sys.modules
        from torchdoctor.cli import main
        main(["ckpt", {str(target)!r}])
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 2, result.stderr
    assert "torchdoctor ckpt needs PyTorch" in result.stderr
    assert "Traceback" not in result.stderr
