"""Answers as rich renderables shared by the terminal and notebooks: the capacity answer, the
metrics table, and the notebook's HTML display of every answer (``notebook``)."""
