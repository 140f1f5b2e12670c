"""core/output/warc.py: WARC 1.1 request/response pairs that warcio reads back."""
from __future__ import annotations

import gzip
import os

from warcio.archiveiterator import ArchiveIterator

from crawltop.core.output.warc import WarcSink

REQ = [("User-Agent", "crawltop/test"), ("Accept", "*/*")]


def read(path: str) -> list:
    out = []
    with open(path, "rb") as fh:
        for rec in ArchiveIterator(fh):
            body = rec.content_stream().read()
            out.append((rec.rec_type, rec.rec_headers, rec.http_headers, body))
    return out


def test_responses_read_back_with_warcio(tmp_path):
    path = str(tmp_path / "crawl.warc.gz")
    sink = WarcSink(path)
    html = b"<html><body>" + "é".encode() * 100 + b"</body></html>"
    sink.response("http://a.test/", 200, "OK", [("Content-Type", "text/html; charset=utf-8"),
                  ("Content-Encoding", "gzip"), ("Content-Length", "37")], html, REQ)
    sink.response("http://a.test/old?x=1", 301, "Moved Permanently",
                  [("Location", "/new"), ("Content-Length", "0")], b"", REQ)
    sink.response("http://a.test/big", 200, "OK", [("Content-Type", "application/octet-stream"),
                  ("Content-Length", "1000")], b"x" * 100, REQ)  # cut by --max-bytes
    sink.write(object())  # records are not archived; write() is a no-op
    sink.close()

    recs = read(path)
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


def test_append_on_resume_and_repair_partial_tail(tmp_path):
    path = str(tmp_path / "crawl.warc.gz")
    sink = WarcSink(path)
    sink.response("http://a.test/1", 200, "OK", [("Content-Type", "text/plain")], b"one", REQ)
    sink.close()
    # a kill mid-write leaves half a gzip member at the end
    with open(path, "ab") as fh:
        fh.write(gzip.compress(b"WARC/1.1\r\nWARC-Type: response\r\n" + b"z" * 5000)[:200])
    size = os.path.getsize(path)
    sink = WarcSink(path)  # resumed crawl: append after cutting the partial record
    assert os.path.getsize(path) < size
    sink.response("http://a.test/2", 200, "OK", [("Content-Type", "text/plain")], b"two", REQ)
    sink.close()
    recs = read(path)
    assert [r[0] for r in recs] == ["warcinfo", "response", "request", "response", "request"]
    assert [r[3] for r in recs if r[0] == "response"] == [b"one", b"two"]


def test_many_responses_through_the_writer_thread(tmp_path):
    path = str(tmp_path / "many.warc.gz")
    sink = WarcSink(path)
    for i in range(300):
        sink.response(f"http://a.test/{i}", 200, "OK", [("Content-Type", "text/html")], b"<p>%d</p>" % i * 50, REQ)
    sink.flush()
    sink.close()
    urls = [r[1].get_header("WARC-Target-URI") for r in read(path) if r[0] == "response"]
    assert urls == [f"http://a.test/{i}" for i in range(300)]
