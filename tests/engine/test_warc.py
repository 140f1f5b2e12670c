"""core/output/warc.py: WARC 1.1 request/response pairs that warcio reads back, in rotated
files (core/output/warcfiles.py) with revisits and a CDXJ index (core/output/cdxj.py)."""
from __future__ import annotations

import asyncio
import gzip
import os

import pytest
from warcio.archiveiterator import ArchiveIterator

from crawltop.core.output.cdxj import read as read_cdxj
from crawltop.core.output.warc import WarcSink, parse_size

REQ = [("User-Agent", "crawltop/test"), ("Accept", "*/*")]
HTML = [("Content-Type", "text/html")]


def read(path: str) -> list:
    out = []
    with open(path, "rb") as fh:
        for rec in ArchiveIterator(fh):
            body = rec.content_stream().read()
            out.append((rec.rec_type, rec.rec_headers, rec.http_headers, body))
    return out


def test_responses_read_back_with_warcio(tmp_path):
    sink = WarcSink(str(tmp_path / "crawl.warc.gz"))
    html = b"<html><body>" + "é".encode() * 100 + b"</body></html>"
    sink.response("http://a.test/", 200, "OK", [("Content-Type", "text/html; charset=utf-8"),
                  ("Content-Encoding", "gzip"), ("Content-Length", "37")], html, REQ)
    sink.response("http://a.test/old?x=1", 301, "Moved Permanently",
                  [("Location", "/new"), ("Content-Length", "0")], b"", REQ)
    sink.response("http://a.test/big", 200, "OK", [("Content-Type", "application/octet-stream"),
                  ("Content-Length", "1000")], b"x" * 100, REQ)  # cut by --max-bytes
    sink.write(object())  # records are not archived; write() is a no-op
    sink.close()

    recs = read(str(tmp_path / "crawl-00000.warc.gz"))
    assert recs[0][0] == "warcinfo"
    assert all(r[1].protocol == "WARC/1.1" for r in recs)
    responses = [r for r in recs if r[0] == "response"]
    requests = [r for r in recs if r[0] == "request"]
    assert [r[1].get_header("WARC-Target-URI") for r in responses] == [
        "http://a.test/", "http://a.test/old?x=1", "http://a.test/big"]
    assert len(requests) == 3
    first = responses[0]
    assert first[3] == html  # the decoded body
    assert first[2].get_statuscode() == "200"
    assert first[2].get_header("Content-Encoding") is None  # we store the decoded body
    assert first[2].get_header("X-Crawltop-Orig-Content-Encoding") == "gzip"
    assert first[2].get_header("Content-Length") == str(len(html))
    assert responses[1][2].get_statuscode() == "301" and responses[1][2].get_header("Location") == "/new"
    assert responses[2][1].get_header("WARC-Truncated") == "length"
    assert first[1].get_header("WARC-Truncated") is None
    # requests point at their responses and carry the request line and headers
    req = requests[1]
    assert req[2].protocol == "GET" or req[2].statusline.startswith("GET")
    assert "/old?x=1" in req[2].statusline
    assert req[2].get_header("User-Agent") == "crawltop/test"
    assert req[2].get_header("Host") == "a.test"
    assert req[1].get_header("WARC-Concurrent-To") == responses[1][1].get_header("WARC-Record-ID")


def test_a_killed_runs_open_file_is_cut_to_its_last_record_and_the_next_run_writes_the_next_file(tmp_path):
    base = str(tmp_path / "crawl.warc.gz")
    sink = WarcSink(base)
    sink.response("http://a.test/1", 200, "OK", [("Content-Type", "text/plain")], b"one", REQ)
    sink.flush()
    open_path = sink.path
    assert open_path.endswith("crawl-00000.warc.gz.open")
    # a kill mid-write: the thread dies with the process, half a gzip member at the end
    with open(open_path, "ab") as fh:
        fh.write(gzip.compress(b"WARC/1.1\r\nWARC-Type: response\r\n" + b"z" * 5000)[:200])
    os.rename(open_path, open_path + ".kept")  # the live writer keeps its lock on the inode
    with open(open_path + ".kept", "rb") as src, open(open_path, "wb") as dst:
        dst.write(src.read())
    size = os.path.getsize(open_path)
    sink2 = WarcSink(base)  # resumed: finishes the abandoned file, then claims the next
    assert sink2.repaired == [str(tmp_path / "crawl-00000.warc.gz")]
    assert os.path.getsize(tmp_path / "crawl-00000.warc.gz") < size and not os.path.exists(open_path)
    assert sink2.path.endswith("crawl-00001.warc.gz.open")
    sink2.response("http://a.test/2", 200, "OK", [("Content-Type", "text/plain")], b"two", REQ)
    sink2.close()
    first, second = read(str(tmp_path / "crawl-00000.warc.gz")), read(str(tmp_path / "crawl-00001.warc.gz"))
    assert [r[0] for r in first] == ["warcinfo", "response", "request"]
    assert [r[0] for r in second] == ["warcinfo", "response", "request"]
    assert [r[3] for r in first + second if r[0] == "response"] == [b"one", b"two"]
    index = list(read_cdxj(str(tmp_path / "crawl.cdxj")))  # both files, the repaired one indexed by reading it
    assert [(f["url"], f["filename"]) for _, _, f in index] == [
        ("http://a.test/1", "crawl-00000.warc.gz"), ("http://a.test/2", "crawl-00001.warc.gz")]


def test_a_live_writers_file_is_left_alone(tmp_path):
    base = str(tmp_path / "crawl.warc.gz")
    one = WarcSink(base)
    two = WarcSink(base)  # another process of the same crawl: its own file, the first one untouched
    assert one.path != two.path and os.path.exists(one.path)
    one.response("http://a.test/1", 200, "OK", HTML, b"<p>1</p>", REQ)
    two.response("http://a.test/2", 200, "OK", HTML, b"<p>2</p>", REQ)
    one.close()
    two.close()
    assert sorted(os.listdir(tmp_path)) == ["crawl-00000.cdxj", "crawl-00000.warc.gz", "crawl-00001.cdxj",
                                            "crawl-00001.warc.gz", "crawl.cdxj"]
    assert len(list(read_cdxj(str(tmp_path / "crawl.cdxj")))) == 2


def test_many_responses_through_the_writer_thread(tmp_path):
    sink = WarcSink(str(tmp_path / "many.warc.gz"))
    for i in range(300):
        sink.response(f"http://a.test/{i}", 200, "OK", HTML, b"<p>%d</p>" % i * 50, REQ)
    sink.flush()
    sink.close()
    urls = [r[1].get_header("WARC-Target-URI") for r in read(str(tmp_path / "many-00000.warc.gz"))
            if r[0] == "response"]
    assert urls == [f"http://a.test/{i}" for i in range(300)]


def test_rotation_at_max_size_each_file_with_its_warcinfo_and_every_response_in_one(tmp_path):
    sink = WarcSink(str(tmp_path / "r.warc.gz"), max_size=8192, info={"crawltop-settings": '{"x": 1}'})
    for i in range(60):
        sink.response(f"http://a.test/{i}", 200, "OK", HTML, os.urandom(300).hex().encode(), REQ)
    sink.close()
    files = sorted(p for p in os.listdir(tmp_path) if p.endswith(".warc.gz"))
    assert len(files) >= 4 and files == sorted(sink.files and [os.path.basename(f) for f in sink.files])
    seen: list[str] = []
    for name in files:
        recs = read(str(tmp_path / name))
        assert recs[0][0] == "warcinfo" and b"crawltop-settings: {\"x\": 1}" in recs[0][3]
        assert b"isPartOf: r" in recs[0][3]
        assert recs[0][1].get_header("WARC-Filename") == name
        seen += [r[1].get_header("WARC-Target-URI") for r in recs if r[0] == "response"]
        assert os.path.getsize(tmp_path / name) < 8192 + 2000  # closed at the first record boundary past the size
    assert seen == [f"http://a.test/{i}" for i in range(60)]


def test_revisits_refer_to_the_first_copy_and_the_index_points_at_each_record(tmp_path):
    sink = WarcSink(str(tmp_path / "d.warc.gz"))
    logo = b"\x89PNG" + bytes(range(256)) * 8
    for i in range(5):
        sink.response(f"http://a.test/logo{i}.png", 200, "OK", [("Content-Type", "image/png")], logo, REQ)
    sink.response("http://a.test/empty", 200, "OK", HTML, b"", REQ)
    sink.response("http://a.test/empty2", 200, "OK", HTML, b"", REQ)  # an empty payload is never a revisit
    sink.response("http://a.test/404", 404, "Not Found", HTML, logo, REQ)  # nor a non-2xx
    sink.close()
    assert (sink.responses, sink.revisits) == (4, 4)
    path = str(tmp_path / "d-00000.warc.gz")
    recs = read(path)
    first = next(r for r in recs if r[0] == "response")
    revisits = [r for r in recs if r[0] == "revisit"]
    assert len(revisits) == 4
    for r in revisits:
        h = r[1]
        assert h.get_header("WARC-Profile") == "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
        assert h.get_header("WARC-Refers-To-Target-URI") == "http://a.test/logo0.png"
        assert h.get_header("WARC-Refers-To-Date") == first[1].get_header("WARC-Date")
        assert h.get_header("WARC-Refers-To") == first[1].get_header("WARC-Record-ID")
        assert h.get_header("WARC-Payload-Digest") == first[1].get_header("WARC-Payload-Digest")
        assert r[2].get_statuscode() == "200" and r[2].get_header("Content-Type") == "image/png"
        assert r[3] == b""  # the headers only
    # CDXJ: sorted, one line per response and revisit, each offset a record warcio reads
    lines = open(tmp_path / "d.cdxj", encoding="utf-8").read().splitlines()
    assert lines == sorted(lines) and len(lines) == 8
    with open(path, "rb") as fh:
        for key, ts, f in read_cdxj(str(tmp_path / "d.cdxj")):
            assert key.startswith("test,a)/") and len(ts) == 14
            fh.seek(int(f["offset"]))
            rec = next(iter(ArchiveIterator(fh)))
            assert rec.rec_headers.get_header("WARC-Target-URI") == f["url"]
            assert rec.rec_type == ("revisit" if f["mime"] == "warc/revisit" else "response")
            assert rec.rec_headers.get_header("WARC-Payload-Digest") == f["digest"]


def test_no_dedup_and_dedup_from_an_earlier_index(tmp_path):
    body = b"<p>same</p>" * 20
    off = WarcSink(str(tmp_path / "a.warc.gz"), dedup=False)
    for i in range(3):
        off.response(f"http://a.test/{i}", 200, "OK", HTML, body, REQ)
    off.close()
    assert (off.responses, off.revisits) == (3, 0)
    later = WarcSink(str(tmp_path / "b.warc.gz"), dedup_from=[str(tmp_path / "a.cdxj")])
    later.response("http://a.test/other", 200, "OK", HTML, body, REQ)
    later.close()
    (rec,) = [r for r in read(str(tmp_path / "b-00000.warc.gz")) if r[0] != "warcinfo" and r[0] != "request"]
    assert rec[0] == "revisit" and rec[1].get_header("WARC-Refers-To-Target-URI") == "http://a.test/0"


async def test_the_future_completes_only_once_the_records_are_in_the_file(tmp_path):
    sink = WarcSink(str(tmp_path / "f.warc.gz"))
    futs = [sink.response(f"http://a.test/{i}", 200, "OK", HTML, os.urandom(2000), REQ) for i in range(50)]
    assert all(f is not None for f in futs)
    await asyncio.wait_for(asyncio.gather(*futs), 10)  # type: ignore[arg-type]
    with open(sink.path, "rb") as fh:  # still open: what it says is written is in the file, whole
        urls = [r.rec_headers.get_header("WARC-Target-URI") for r in ArchiveIterator(fh) if r.rec_type == "response"]
    assert urls == [f"http://a.test/{i}" for i in range(50)]
    sink.close()


@pytest.mark.parametrize(("text", "size"), [("1G", 1 << 30), ("500M", 500 << 20), ("64k", 64 << 10),
                                            ("1GiB", 1 << 30), ("100000", 100000)])
def test_sizes(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "G", "lots", "1X", "100"])
def test_bad_sizes(text):
    with pytest.raises(ValueError):
        parse_size(text)
