"""Runtime detectors: one module per topic, imported by name below (nothing is found by
scanning the folder).

Importing this package registers every runtime detector with
:func:`torchdoctor.rules.detectors.detector`; the cross-rank detectors (``TD8xx``) are in
:mod:`torchdoctor.distributed.detectors`, which
:data:`torchdoctor.rules.detectors.DETECTOR_MODULES` loads after this package. The
interface they implement is in :mod:`torchdoctor.runtime.detectors.base`.

A new detector module gets one import line here (a test fails on a module that registers
a detector and is not listed). Order matters: hooks run in this order, and ``on_finish``
sees the findings of the modules before it, so a root cause's module comes before the
modules of the symptoms it explains (see :mod:`torchdoctor.runtime.detectors.explains`).
A module whose order does not matter goes at the end.
"""

from __future__ import annotations

# isort: skip_file
# The order of these imports is the order detectors run in; keep it, do not sort it.

# Root causes first: their findings silence the symptoms they explain.
from torchdoctor.runtime.detectors import root_causes  # noqa: F401
from torchdoctor.runtime.detectors import gradients  # noqa: F401
from torchdoctor.runtime.detectors import nonfinite  # noqa: F401
from torchdoctor.runtime.detectors import scale  # noqa: F401
from torchdoctor.runtime.detectors import updates  # noqa: F401
from torchdoctor.runtime.detectors import coverage  # noqa: F401
from torchdoctor.runtime.detectors import loss  # noqa: F401
from torchdoctor.runtime.detectors import modes  # noqa: F401
from torchdoctor.runtime.detectors import graph  # noqa: F401
from torchdoctor.runtime.detectors import memory  # noqa: F401
from torchdoctor.runtime.detectors import pipeline  # noqa: F401
from torchdoctor.runtime.detectors import exceptions  # noqa: F401
from torchdoctor.runtime.detectors import warnings  # noqa: F401
from torchdoctor.runtime.detectors import compile  # noqa: F401
from torchdoctor.runtime.detectors import schedules  # noqa: F401
from torchdoctor.runtime.detectors import freezing  # noqa: F401

# Order-free modules, alphabetically (add new ones here).
from torchdoctor.runtime.detectors import accumulation  # noqa: F401
from torchdoctor.runtime.detectors import clipping  # noqa: F401
from torchdoctor.runtime.detectors import copies  # noqa: F401
from torchdoctor.runtime.detectors import curves  # noqa: F401
from torchdoctor.runtime.detectors import dropout  # noqa: F401
from torchdoctor.runtime.detectors import frozen_head  # noqa: F401
from torchdoctor.runtime.detectors import frozen_updates  # noqa: F401
from torchdoctor.runtime.detectors import kl_domain  # noqa: F401
from torchdoctor.runtime.detectors import loading  # noqa: F401
from torchdoctor.runtime.detectors import loss_domain  # noqa: F401
from torchdoctor.runtime.detectors import module_flags  # noqa: F401
from torchdoctor.runtime.detectors import precision  # noqa: F401
from torchdoctor.runtime.detectors import reach  # noqa: F401
from torchdoctor.runtime.detectors import recurrent  # noqa: F401
from torchdoctor.runtime.detectors import target_grad  # noqa: F401
from torchdoctor.runtime.detectors import token_weighting  # noqa: F401
from torchdoctor.runtime.detectors import train_override  # noqa: F401
from torchdoctor.runtime.detectors import warmup  # noqa: F401
from torchdoctor.runtime.detectors import worker_streams  # noqa: F401
