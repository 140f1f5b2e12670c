"""Local files a user names are read with bounds (core/localfile.py): an index or a record
file whose line never ends is not held in memory, and what came before it still counts."""
from __future__ import annotations

import io
from pathlib import Path

import pytest

from crawltop.core.errors import UsageError
from crawltop.core.localfile import MB, lines, read_text
from crawltop.core.output import cdxj


def test_lines_stop_at_a_line_past_the_limit() -> None:
    fh = io.StringIO("a\n" + "x" * 50 + "\nb\n")
    assert list(lines(fh, 10)) == ["a\n", None]  # and nothing after it is read
    assert list(lines(io.StringIO("a\n" + "y" * 9 + "\n"), 10)) == ["a\n", "y" * 9 + "\n"]
    assert list(lines(io.StringIO("last line, no newline"), 100)) == ["last line, no newline"]


def test_read_text_refuses_a_file_past_its_limit(tmp_path: Path) -> None:
    big = tmp_path / "big"
    big.write_bytes(b"a" * (MB + 1))
    with pytest.raises(UsageError, match="more than 1 MB"):
        read_text(str(big), "--header", MB)
    assert read_text(str(big), "--header", 2 * MB) == "a" * (MB + 1)
    with pytest.raises(UsageError, match="/dev/zero: more than 1 MB"):
        read_text("/dev/zero", "--cookies", MB)


def test_a_cdxj_index_stops_at_a_line_that_is_no_index_line(tmp_path: Path) -> None:
    index = tmp_path / "old.cdxj"
    good = 'org,example)/ 20261126000000 {"url": "http://example.org/", "digest": "sha1:AAAA"}\n'
    index.write_text(good + "z" * (MB + 10) + "\n" + good.replace("example", "other"))
    assert [key for key, _, _ in cdxj.read(str(index))] == ["org,example)/"]
