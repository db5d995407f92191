"""Units: binary vs decimal sizes, cdiv, parsing."""

import pytest

from kvplan.errors import InputError
from kvplan.units import GB, GiB, KiB, cdiv, fmt_bytes, parse_size


def test_lesson_kb_are_binary() -> None:
    assert 320 * KiB == 327_680


def test_cdiv() -> None:
    assert cdiv(2048, 16) == 128
    assert cdiv(2049, 16) == 129
    assert cdiv(0, 16) == 0


def test_parse_size_units() -> None:
    assert parse_size("24GiB") == 24 * GiB
    assert parse_size("24 GB") == 24 * GB
    assert parse_size("1.5G") == int(1.5 * GiB)
    assert parse_size("4096") == 4096


@pytest.mark.parametrize("bad", ["", "abc", "12 parsecs", "-3GiB"])
def test_parse_size_rejects(bad: str) -> None:
    with pytest.raises(InputError):
        parse_size(bad)


def test_fmt_bytes_like_vllm() -> None:
    assert fmt_bytes(327_680) == "320.00 KiB"
    assert fmt_bytes(40 * GiB) == "40.00 GiB"
    assert fmt_bytes(512) == "512 B"
