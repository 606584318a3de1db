"""torchdoctor inside the training frameworks people already use.

* :mod:`torchdoctor.integrations.lightning`: ``DoctorCallback`` for PyTorch Lightning's
  ``Trainer``;
* :mod:`torchdoctor.integrations.transformers`: ``DoctorCallback`` for Hugging Face's
  ``Trainer``;
* the pytest plugin lives in :mod:`torchdoctor.pytest_plugin`.

Each module imports its framework when it is imported itself; this package imports none.
"""

from __future__ import annotations

__all__: list[str] = []
