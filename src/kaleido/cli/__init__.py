"""The ``kaleido`` command line (one module per subcommand, loaded lazily)."""
