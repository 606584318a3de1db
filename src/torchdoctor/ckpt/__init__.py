"""``torchdoctor ckpt``: inspect, compare, remap and diff checkpoints, safely.

Checkpoints load with ``weights_only=True`` (no code from the file runs) unless the caller
passes ``trust=True``; a file that needs more is described from a scan of its pickle and
reported (TD902) instead of loaded. Zip checkpoints are memory-mapped where torch supports
it, so inspecting a large file does not read it into memory. The file is never modified.

Importing this package registers the ``ckpt`` detectors and does not import torch.
"""

from __future__ import annotations

# Registers the detectors of the ckpt depth (see torchdoctor.rules.detectors).
from torchdoctor.ckpt import detectors as _detectors  # noqa: F401
from torchdoctor.ckpt import model_detectors as _model_detectors  # noqa: F401
from torchdoctor.ckpt.api import diagnose, inspect_checkpoint
from torchdoctor.ckpt.compare import Comparison
from torchdoctor.ckpt.contents import CheckpointContents, StateDict, TensorInfo
from torchdoctor.ckpt.mapping import KeyMapping, Rewrite
from torchdoctor.ckpt.target import load_model

__all__ = [
    "CheckpointContents",
    "Comparison",
    "KeyMapping",
    "Rewrite",
    "StateDict",
    "TensorInfo",
    "diagnose",
    "inspect_checkpoint",
    "load_model",
]
