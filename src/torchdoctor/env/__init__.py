"""``torchdoctor env``: the environment facts that change how training behaves.

:func:`facts` returns a frozen :class:`EnvFacts`; :func:`diagnose` wraps them in a
:class:`~torchdoctor.Report` with findings for the settings that hurt a training run.
Called inside a training script, both see that script's own torch settings.

Importing this package registers the ``env`` detectors and does not import torch.
"""

from __future__ import annotations

# Registers the detectors of the env depth (see torchdoctor.rules.detectors).
from torchdoctor.env import debug_variables as _debug_variables  # noqa: F401
from torchdoctor.env import detectors as _detectors  # noqa: F401
from torchdoctor.env.api import diagnose, facts_to_dict
from torchdoctor.env.facts import DeviceInfo, EnvFacts, facts

__all__ = ["DeviceInfo", "EnvFacts", "diagnose", "facts", "facts_to_dict"]
