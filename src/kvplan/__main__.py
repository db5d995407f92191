"""`python -m kvplan` runs the CLI (the console script's entry: kvplan.cli.console)."""

from kvplan.cli import console

console()
