"""The accelerator-baseline designs: AdapTiV-, EXION- and Cambricon-D-class cost models.

One module per design, each on the simulator's array and cycle model, with the same
names: ``DESIGN`` (its label), ``ASSUMPTIONS`` (what it does not model), ``INPUTS``
(every input of a replay with its origin: MEASURED / paper / ASSUMED), ``gemm_cost``
(the ideal per-op-fraction model, the replay's upper bound), ``replay_cost`` (the
utilisation model :func:`kaleido.hw.baseline_replay.replay` runs per recorded step and
layer) and ``simulate_<design>`` (the ideal model over a workload, for sweep rows
recorded without a trace).  :mod:`.common` holds what they share (measured MAC shares,
per-GEMM costs, the side-unit rate).

The algorithms that produce their statistics are in :mod:`kaleido.baselines`; this
package never imports them (the simulator is the lower layer).
"""

from . import adaptiv, cambricon_d, exion

#: method name (as :mod:`kaleido.baselines` names it) -> its accelerator design module
DESIGNS = {"adaptiv": adaptiv, "exion": exion, "cambricon_d": cambricon_d}
