"""The `el` command line: a thin surface over the service layer."""
