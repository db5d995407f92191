"""The typer-free start-up path: --help, --version and plain `kv` and `simulate` runs answered
without importing typer, click or rich; everything else is handed to typer (cli.app)."""
