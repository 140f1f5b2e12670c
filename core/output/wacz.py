"""WACZ 1.1.1, the Webrecorder package ReplayWeb.page and Browsertrix share: one ZIP of
`archive/*.warc.gz` (stored, not deflated, so a reader can seek into them),
`indexes/index.cdxj`, `pages/pages.jsonl` (each HTML page's URL, timestamp and title)
and `datapackage.json` (every file's SHA-256 and size), with `datapackage-digest.json`.

Written here rather than with webrecorder's `wacz` package: that pulls in frictionless
(pydantic, jsonschema, petl, typer, ...) at run time for what is a ZIP and two JSON files;
the tests check our packages with its `wacz validate`. The index is the crawl's CDXJ
when it covers these files, else made by reading them (core/output/cdxj.py).
"""
from __future__ import annotations

import hashlib
import json
import os
import time
import uuid
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from warcio.archiveiterator import ArchiveIterator  # type: ignore[import-untyped]  # warcio has no type hints

from ..parsing.page import parse_tree
from . import cdxj

WACZ_VERSION = "1.1.1"
TITLE_BYTES = 256 * 1024  # a page's title is near its top


@dataclass(frozen=True, slots=True)
class Packed:
    path: str
    warcs: int
    pages: int
    index_lines: int
    size: int


def _title(body: bytes) -> str:
    """An archived page's title; its markup is a server's, so it is parsed under the
    ceiling a crawl's pages are (core/parsing/page.py parse_tree)."""
    tree = parse_tree(body[:TITLE_BYTES])
    node = tree.css_first("title") if tree is not None else None
    return " ".join(node.text().split()) if node is not None else ""


def pages_of(warc: str, titles: dict[str, str]) -> list[dict[str, Any]]:
    """The HTML pages (2xx, text/html or xhtml) of one WARC file, responses and revisits
    (a revisit's title is its original's, from `titles`: payload digest -> title)."""
    out = []
    with open(warc, "rb") as fh:
        for rec in ArchiveIterator(fh):
            if rec.rec_type not in ("response", "revisit") or rec.http_headers is None:
                continue
            status = rec.http_headers.get_statuscode() or ""
            mime = cdxj.mime_of(rec.http_headers.get_header("Content-Type")) or ""
            if not status.startswith("2") or mime not in ("text/html", "application/xhtml+xml"):
                continue
            digest = rec.rec_headers.get_header("WARC-Payload-Digest") or ""
            if rec.rec_type == "response":
                title = titles[digest] = _title(rec.content_stream().read(TITLE_BYTES))
            else:
                title = titles.get(digest, "")
            out.append({"id": uuid.uuid4().hex, "url": rec.rec_headers.get_header("WARC-Target-URI"),
                        "ts": rec.rec_headers.get_header("WARC-Date"), "title": title})
    return out


def _sha256(path: str) -> tuple[int, str]:
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
            size += len(chunk)
    return size, "sha256:" + h.hexdigest()


def pack(warcs: Sequence[str], out: str, *, index: str | None = None, title: str | None = None,
         software: str = "crawltop") -> Packed:
    """Write the WACZ of these WARC files to `out` (whole or not at all: a temporary file
    renamed). `index`: a CDXJ file covering exactly them (else they are indexed here)."""
    if not warcs:
        raise ValueError("no WARC files to pack")
    names = [os.path.basename(w) for w in warcs]
    if len(set(names)) != len(names):
        raise ValueError("two WARC files with one name")
    if index is not None:
        with open(index, encoding="utf-8") as fh:
            lines = [ln.rstrip("\n") for ln in fh if ln.strip()]
        if {json.loads(ln.split(" ", 2)[2]).get("filename") for ln in lines} - set(names):
            index = None  # it names files we do not pack: make our own
    if index is None:
        lines = sorted(ln for w, n in zip(warcs, names, strict=True) for ln in cdxj.index_warc(w, n))
    titles: dict[str, str] = {}
    pages = [p for w in warcs for p in pages_of(w, titles)]
    pages_text = "\n".join([json.dumps({"format": "json-pages-1.0", "id": "pages", "title": "All Pages"}),
                            *(json.dumps(p, ensure_ascii=False) for p in pages)]) + "\n"
    index_text = "\n".join(lines) + "\n"
    tmp = f"{out}.tmp{os.getpid()}"
    resources: list[dict[str, Any]] = []
    stamp = time.gmtime()[:6]
    try:
        with zipfile.ZipFile(tmp, "w", allowZip64=True) as z:
            for w, n in zip(warcs, names, strict=True):
                info = zipfile.ZipInfo(f"archive/{n}", stamp)
                info.compress_type = zipfile.ZIP_STORED  # a reader seeks into these by offset
                with open(w, "rb") as src, z.open(info, "w", force_zip64=True) as dst:
                    while chunk := src.read(1 << 20):
                        dst.write(chunk)
                size, digest = _sha256(w)
                resources.append({"name": n.lower(), "path": f"archive/{n}", "hash": digest, "bytes": size})
            for path, text in (("indexes/index.cdxj", index_text), ("pages/pages.jsonl", pages_text)):
                data = text.encode("utf-8")
                info = zipfile.ZipInfo(path, stamp)
                info.compress_type = zipfile.ZIP_DEFLATED
                z.writestr(info, data)
                resources.append({"name": os.path.basename(path), "path": path,
                                  "hash": "sha256:" + hashlib.sha256(data).hexdigest(), "bytes": len(data)})
            package: dict[str, Any] = {"profile": "data-package", "resources": resources}
            if title:
                package["title"] = title
            if pages:
                package["mainPageURL"], package["mainPageDate"] = pages[0]["url"], pages[0]["ts"]
            package.update(created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                           wacz_version=WACZ_VERSION, software=software)
            pkg = json.dumps(package, indent=2).encode("utf-8")
            z.writestr(zipfile.ZipInfo("datapackage.json", stamp), pkg)
            digest_doc = {"path": "datapackage.json", "hash": "sha256:" + hashlib.sha256(pkg).hexdigest()}
            z.writestr(zipfile.ZipInfo("datapackage-digest.json", stamp), json.dumps(digest_doc, indent=2))
        os.replace(tmp, out)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return Packed(out, len(warcs), len(pages), len(lines), os.path.getsize(out))
