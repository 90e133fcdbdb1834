"""The Storm dialect on Spark: one RDD job per micro-batch, stateful bolts as checkpoint participants."""
