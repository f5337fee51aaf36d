"""What a simulation is turned into: the report files and what the paper's figures would need."""
