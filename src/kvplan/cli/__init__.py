"""The `kvplan` command line: builds specs, calls the API, renders. No arithmetic here."""

from kvplan.cli.fast.entry import console, main

__all__ = ["console", "main"]
