"""The ``check`` depth's probes. Importing this package registers them all.

Modules are imported by name, one per topic, in the order their probes run: cheap
inspections of the objects first, then the probes that share the training pass, then the
ones that train copies of the model.
"""

from __future__ import annotations

# isort: skip_file
# The order of these imports is the order the probes run in; keep it, do not sort it.

from torchdoctor.preflight.probes import devices  # noqa: F401
from torchdoctor.preflight.probes import dtypes  # noqa: F401
from torchdoctor.preflight.probes import data  # noqa: F401
from torchdoctor.preflight.probes import loss  # noqa: F401
from torchdoctor.preflight.probes import loss_value  # noqa: F401
from torchdoctor.preflight.probes import gradients  # noqa: F401
from torchdoctor.preflight.probes import optimizer  # noqa: F401
from torchdoctor.preflight.probes import freezing  # noqa: F401
from torchdoctor.preflight.probes import modes  # noqa: F401
from torchdoctor.preflight.probes import batch_independence  # noqa: F401
from torchdoctor.preflight.probes import training_mode  # noqa: F401
from torchdoctor.preflight.probes import learning  # noqa: F401
from torchdoctor.preflight.probes import reproducibility  # noqa: F401
from torchdoctor.preflight.probes import roundtrip  # noqa: F401
from torchdoctor.preflight.probes import loader  # noqa: F401
from torchdoctor.preflight.probes import augmentations  # noqa: F401
from torchdoctor.preflight.probes import forecast  # noqa: F401
