"""The JSON API's routers, one per page's answers (``web/app.py`` mounts each)."""
