"""Spouts: Spark streaming sources whose progress Spark checkpoints."""

from weir.sources.builtin import DataFrameSpout, FileSpout, RateSpout
from weir.topology.components import Guarantee

__all__ = ["DataFrameSpout", "FileSpout", "Guarantee", "RateSpout"]
