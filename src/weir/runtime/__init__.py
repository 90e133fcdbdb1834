"""Runtimes: the only code that knows an execution engine (Spark)."""
