"""The engines' Redis client packs its commands with hiredis (core/cluster/connect.py,
less CPU a command): what reaches a real redis-server must be what redis-py's own packer sends."""
from __future__ import annotations

import asyncio

import pytest
from redis.asyncio.connection import Connection
from redis.exceptions import DataError

from crawltop.core.cluster.connect import client

# What the scripts' calls hold: names, ints of every size, floats (delay_factor), bytes
# (fingerprints), text beyond ASCII, JSON, empty strings, a memoryview.
ARGS = ("EVALSHA", "f" * 40, 2, "crawltop:{n}:meta", "crawltop:{n}:seen", 0, -5, 2**70, 0.5, 1.0, 1e-05,
        0.1 + 0.2, b"\x00\xff\x80", "h\u00e9\u2603\U0001f600", '{"url": "http://a/b?c=d"}', "",
        memoryview(b"mv"))


def test_a_command_is_packed_as_redis_py_packs_it():
    r = client("redis://127.0.0.1:9/0", linked=True)  # packing needs no server: nothing connects
    conn = r.connection_pool.make_connection()
    assert type(conn).pack_command is not Connection.pack_command  # hiredis is installed with redis[hiredis]
    ours = b"".join(conn.pack_command(*ARGS))
    theirs = b"".join(bytes(c) for c in Connection.pack_command(conn, *ARGS))
    assert ours == theirs
    # a command name of two words is split as redis-py splits it
    assert b"".join(conn.pack_command("SCRIPT LOAD", "return 1")) == b"".join(
        Connection.pack_command(conn, "SCRIPT LOAD", "return 1"))
    # what redis-py refuses, it still refuses in its own words
    with pytest.raises(DataError):
        conn.pack_command("SET", "k", None)


def test_a_real_server_reads_what_was_packed(redis_url):
    async def go() -> list:
        r = client(redis_url, linked=True)
        try:
            echo = "local out = {} for i, v in ipairs(ARGV) do out[i] = v end return out"
            got = await r.eval(echo, 0, *ARGS[5:])
            await r.set("k", "h\u00e9")
            sha = await r.script_load("return 7")  # two words: through redis-py's own packer
            return [got, await r.get("k"), await r.evalsha(sha, 0)]
        finally:
            await r.aclose()

    got, value, seven = asyncio.run(go())
    assert got == [b"0", b"-5", str(2**70).encode(), b"0.5", b"1.0", b"1e-05", repr(0.1 + 0.2).encode(),
                   b"\x00\xff\x80", "h\u00e9\u2603\U0001f600".encode(), b'{"url": "http://a/b?c=d"}', b"", b"mv"]
    assert value == "h\u00e9".encode()
    assert seven == 7
