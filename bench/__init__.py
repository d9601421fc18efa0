"""Benchmarks of the service against real PostgreSQL and Redis; they print figures, never assert."""
