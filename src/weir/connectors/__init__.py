"""Connectors: one package (or module) per external system, above the APIs they implement."""

__all__: list[str] = []  # each system's package exports its own names (weir.connectors.rabbitmq, ...)
