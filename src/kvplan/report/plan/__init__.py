"""The plan's text, JSON, chart and HTML views."""
