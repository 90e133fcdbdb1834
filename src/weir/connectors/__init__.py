"""Connectors: one package per external system, above the APIs they implement (never imported by them)."""
