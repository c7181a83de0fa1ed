"""Global arrays on a Dask cluster: ``run`` (a graph over SBP-split inputs) and ``DataParallel``.

SBP values live in ``la.sbp``, the rules in ``lazyarray/ops/sbp_rules.py``, inference and boxing
in ``graph/passes/sbp.py``; this package holds what runs the pieces: ``pieces.py`` (NumPy
reference of splitting, boxing, regions), ``worker.py`` (a region on one piece) and ``run.py``
(the Dask graph). Dask itself is imported only when a function here is called.
"""
from .checkpoint import load_into as load_checkpoint
from .data_parallel import DataParallel
from .pieces import box, combine, localize, regions, split_value
from .run import run

__all__ = ["run", "DataParallel", "load_checkpoint", "split_value", "combine", "box", "regions", "localize"]
