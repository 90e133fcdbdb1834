"""IBM Streams operators on Spark: their task loop, state handlers and consistent regions."""
