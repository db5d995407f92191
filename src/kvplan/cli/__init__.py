"""The `kvplan` command line: builds specs, calls the API, renders. No arithmetic here."""

from kvplan.cli.fast.entry import main

__all__ = ["main"]
