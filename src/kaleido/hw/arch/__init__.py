"""The architecture models: the array and its buffers, folds, cycles, memory traffic, the PE modes and the
dispatcher, energy, the A100 roofline, several arrays on one chip, and area."""
