"""Connectors: one package (or module) per external system, above the APIs they implement."""
