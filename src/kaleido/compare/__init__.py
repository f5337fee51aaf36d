"""``kaleido compare``: sweeps of methods x settings x prompts x seeds on Dask, and their analysis.

* :mod:`.points` - a sweep point and the key its JSON row is stored under;
* :mod:`.grids` - the default settings of every method, prompts, seeds;
* :mod:`.worker` - what one task computes (dense reference or method vs dense);
* :mod:`.sweep` - Dask LocalCluster or an existing scheduler, resumable;
* :mod:`.analysis` - aggregates, Pareto plot, matched-savings table;
* :mod:`.pipelines` - the pipelines a sweep can run on.
"""

from .points import DENSE, ROW_VERSION, SweepPoint

__all__ = ["SweepPoint", "DENSE", "ROW_VERSION"]
