"""What the simulator is given: the workloads' GEMMs, reuse statistics (Kaleido's profiles and the
baselines' recorded traces) and the rule that carries them to another model or grid."""
