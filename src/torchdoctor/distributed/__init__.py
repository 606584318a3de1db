"""Multi-process jobs: following child processes, launching ranks, one merged report,
and the detectors that compare ranks (``TD8xx`` at run depth).

* :mod:`torchdoctor.distributed.job`: run a job watched (followed children, torchrun
  launch, gather on rank 0);
* :mod:`torchdoctor.distributed.merge`: parts of every process into one report, each
  finding with its ``ranks``;
* :mod:`torchdoctor.distributed.exchange`: torchdoctor's own gloo process group and its
  fixed-size fingerprint exchange, never interleaved with the user's collectives;
* :mod:`torchdoctor.distributed.detectors`: the cross-rank runtime detectors.

Importing this package imports neither torch nor torch.distributed.
"""

from __future__ import annotations
