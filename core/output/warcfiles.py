"""The files of one archive: how their names derive from `--warc FILE`, how a writer
claims the next one, and how a file left open by a kill is finished.

`--warc crawl.warc.gz` (or `crawl.warc`, or `crawl`) names the series `crawl`:
`crawl-00000.warc.gz`, `crawl-00001.warc.gz`, ... and their index `crawl.cdxj`.
A file being written is `crawl-00003.warc.gz.open` (Heritrix's convention), held under
an exclusive flock by its one writer; it is renamed when closed. So:

- a writer (a resumed crawl, each `--processes` child, each `join`) claims the next
  unused number with O_CREAT|O_EXCL: no two writers ever share a file and none is
  overwritten, however they interleave;
- a `.open` file nobody holds the lock of was left by a kill: the next writer to start
  cuts it back to its last whole record (`repair_tail`), indexes it and renames it, so
  every finished file passes `warcio check`.
"""
from __future__ import annotations

import fcntl
import os
import re
from collections.abc import Callable
from dataclasses import dataclass

from warcio.archiveiterator import ArchiveIterator  # type: ignore[import-untyped]  # warcio has no type hints

OPEN = ".open"
_SERIAL = re.compile(r"-(\d{5,})\.warc\.gz(\.open)?$")


@dataclass(frozen=True, slots=True)
class Series:
    """Where an archive's files live and what they are called."""

    directory: str
    stem: str

    @classmethod
    def of(cls, path: str) -> Series:
        path = os.path.abspath(os.fspath(path))
        directory, name = os.path.split(path)
        for suffix in (".warc.gz", ".warc"):
            if name.endswith(suffix) and len(name) > len(suffix):
                name = name[: -len(suffix)]
                break
        return cls(directory, name)

    def warc(self, n: int) -> str:
        return os.path.join(self.directory, f"{self.stem}-{n:05d}.warc.gz")

    def cdxj(self, n: int | None = None) -> str:
        """The crawl's index (n None), or one file's (kept so later runs can merge them)."""
        name = f"{self.stem}.cdxj" if n is None else f"{self.stem}-{n:05d}.cdxj"
        return os.path.join(self.directory, name)

    def numbers(self) -> list[int]:
        """Serial numbers in use (finished or open), in order."""
        out: set[int] = set()
        prefix = self.stem + "-"
        try:
            names = os.listdir(self.directory)
        except OSError:
            return []
        for name in names:
            if name.startswith(prefix):
                m = _SERIAL.match(name[len(self.stem):])
                if m:
                    out.add(int(m.group(1)))
        return sorted(out)

    def finished(self) -> list[str]:
        """The closed WARC files, in order."""
        return [p for n in self.numbers() if os.path.exists(p := self.warc(n))]

    def index_parts(self) -> list[str]:
        return [p for n in self.numbers() if os.path.exists(p := self.cdxj(n))]


class Claimed:
    """One file this writer holds: created exclusively, locked, renamed on `finish()`."""

    def __init__(self, series: Series) -> None:
        n = (series.numbers() or [-1])[-1] + 1
        while True:
            final = series.warc(n)
            if not os.path.exists(final):
                try:
                    fd = os.open(final + OPEN, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                    break
                except FileExistsError:
                    pass
            n += 1
        fcntl.flock(fd, fcntl.LOCK_EX)
        self.number, self.final, self.path = n, final, final + OPEN
        self.fh = os.fdopen(fd, "wb")

    def finish(self) -> None:
        """Close and take the `.open` off (the lock goes with the descriptor)."""
        self.fh.flush()
        os.rename(self.path, self.final)
        self.fh.close()


def finish_abandoned(series: Series, index: Callable[[str, str], list[str]]) -> list[str]:
    """Finish every `.open` file whose writer is gone (nobody holds its lock): cut back to
    its last whole record, its index part written by `index(path, final name)`,
    renamed. Returns the finished files. Held under the file's lock throughout, so two
    writers starting at once never both touch one file."""
    done = []
    for n in series.numbers():
        path = series.warc(n) + OPEN
        try:
            fd = os.open(path, os.O_RDWR)
        except OSError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # a live writer's
            try:
                if os.stat(path).st_ino != os.fstat(fd).st_ino:
                    continue  # finished by another writer meanwhile
            except FileNotFoundError:
                continue
            repair_tail(path)
            final = series.warc(n)
            lines = index(path, os.path.basename(final))
            write_lines(series.cdxj(n), lines)
            os.rename(path, final)
            done.append(final)
        finally:
            os.close(fd)
    return done


def write_lines(path: str, lines: list[str]) -> None:
    """Sorted CDXJ lines, written whole (a temporary file renamed over the name)."""
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.writelines(line + "\n" for line in sorted(lines))
    os.replace(tmp, path)


def valid_length(path: str) -> int:
    """Offset just past the last complete record of an existing WARC file."""
    good = 0
    try:
        with open(path, "rb") as fh:
            it = ArchiveIterator(fh)
            for record in it:
                record.content_stream().read()
                it.read_to_end(record)
                good = it.get_record_offset() + it.get_record_length()
    except Exception:
        pass
    return good


def repair_tail(path: str) -> int:
    """Cut a partial record off the end of a WARC file; returns the bytes removed."""
    size = os.path.getsize(path)
    good = valid_length(path)
    if good < size:
        with open(path, "r+b") as fh:
            fh.truncate(good)
    return size - good
