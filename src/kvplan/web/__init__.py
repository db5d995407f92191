"""The web page: FastAPI routes over the same JSON answers as the CLI (create_app, serve)."""
