"""The ``weir`` command line (entry point :func:`weir.cli.main.main`)."""
