"""A model's notes as text: one line per kind (the transformers defaults a config.json left
out, listed together), each note once."""

from __future__ import annotations

import re
from collections.abc import Iterable

_DEFAULT = re.compile(r"^(?P<key>\w+) absent: transformers default (?P<value>.+)$")


def merged_notes(notes: Iterable[str]) -> list[str]:
    """Each note once, in order; two or more ``KEY absent: transformers default VALUE`` notes
    become one line at the place of the first."""
    out: list[str] = []
    defaults: list[str] = []
    slot = -1  # where the defaults line goes
    for note in dict.fromkeys(notes):
        match = _DEFAULT.match(note)
        if match is None:
            out.append(note)
            continue
        if slot < 0:
            slot = len(out)
            out.append(note)
        defaults.append(f"{match['key']} = {match['value']}")
    if len(defaults) > 1:
        out[slot] = (f"{len(defaults)} fields absent from config.json, transformers defaults "
                     f"used: {', '.join(defaults)}")
    return out
