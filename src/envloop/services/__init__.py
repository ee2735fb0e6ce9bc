"""The operations every surface calls (CLI now; HTTP API, console and client later)."""
