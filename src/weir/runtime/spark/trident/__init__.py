"""The Trident dialect on Spark: a batch planned as DataFrame operations, states committed in their tasks."""
