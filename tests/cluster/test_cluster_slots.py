"""Every script touches one slot: its declared keys hash to one slot, every key it builds
is made from the prefix of KEYS[1] (so it carries the crawl's hash tag), and each starts
with `#!lua`, so that on a cluster Redis itself refuses a key of another slot."""
from __future__ import annotations

import re

import pytest
from redis.cluster import RedisCluster
from redis.crc import key_slot
from redis.exceptions import ResponseError

from crawltop.core.cluster import partscripts, scripts
from crawltop.core.cluster.frontier import RedisFrontier
from crawltop.core.cluster.keys import Keys
from crawltop.core.cluster.parted import PartedFrontier

# the scripts of a crawl in partitions, beside those of every crawl
PARTED = {name: getattr(partscripts, name) for name in
          ("PBEAT", "CTLBEAT", "GIVEBACK", "DEPART", "GRANT", "FINISHED", "EMPTY", "RECORDS")}
EVERY = {**scripts.ALL, **PARTED}

# What a key argument of redis.call may be: a name bound to KEYS, KEYS[n] itself, or a key
# built from the prefix P (hk, qk, P .. '...'); hh is hk(h), q and Q a lane's ready zset.
DECLARED = {"META", "COUNT", "READY", "LATER", "LEASES", "OWNER", "HELD", "SEEN", "REC", "HOSTS", "IDLE", "IDLEQ",
            "Q", "q", "meta", "beats_key", "hh", "key"}  # key: a seen bucket, SEEN .. ':' .. (core/cluster/seen.py)
BUILT = re.compile(r"^(KEYS\[\d+\]|READIES\[[^]]+\]|IDLES\[[^]]+\]|hk\(\w+|qk\(\w+|P \.\. '[\w:]+'.*)$")
KEYLESS = {"TIME", "PUBLISH", "SPUBLISH"}


@pytest.mark.parametrize("name", list(EVERY))
def test_every_script_starts_with_the_shebang_and_builds_keys_from_its_declared_prefix(name: str) -> None:
    text = EVERY[name]
    assert text.startswith("#!lua\n")
    for command, key in re.findall(r"redis\.call\('(\w+)'(?:,\s*([^,)]+))?", text):
        if command in KEYLESS:
            continue
        key = key.strip()
        assert key in DECLARED or BUILT.match(key), (name, command, key)
    if "seen_add" in text or "seen_has" in text:
        assert "return SEEN .. ':' .. math.floor(hi / below), hi % below, width" in text
        assert "return key .. '.' .. bit" in text and "return key .. bit" in text
    if "local function hk" in text:
        assert "local P, PROC = string.sub(KEYS[1], 1, -5)" in text  # P is meta's prefix, not an argument
        assert "local function hk(h) return P .. 'h:' .. h end" in text
        assert "local function qk(h) return P .. 'hq:' .. h end" in text


@pytest.mark.parametrize("name", ["docs", "a:b", "x}y", "with space"])
def test_the_keys_of_a_crawl_are_one_slot(name: str) -> None:
    k = Keys(name)
    frontier = RedisFrontier.__new__(RedisFrontier)  # std_keys needs only keys and proc
    frontier.keys, frontier.proc = k, "host:1:ab"
    keys = [*frontier.std_keys(), k.procs, k.beats, k.snap("p"), k.ctl, k.ctl_of("p"), k.ignores, k.left,
            k.digests, k.bell, k.hq("www.example.com"), k.h("{evil}.example.com"), k.held("other:2:cd")]
    assert keys[0] == k.prefix + "meta"
    assert len({key_slot(key.encode()) for key in keys}) == 1, name


@pytest.mark.redis
def test_a_cluster_refuses_a_script_that_slips_out_of_its_slot(cluster_six) -> None:
    """The shebang is what makes Redis check: a key of another slot, undeclared, is refused."""
    rc = RedisCluster.from_url(cluster_six.url)
    try:
        k = Keys("slip")
        other = next(f"crawltop:{{x{i}}}:meta" for i in range(100)
                     if key_slot(f"crawltop:{{x{i}}}:meta".encode()) != key_slot(k.meta.encode())
                     and rc.get_node_from_key(f"crawltop:{{x{i}}}:meta") == rc.get_node_from_key(k.meta))
        with pytest.raises(ResponseError, match="same slot"):
            rc.eval(scripts.SHEBANG + "return redis.call('GET', ARGV[1])", 1, k.meta, other)
        assert rc.eval("return redis.call('GET', ARGV[1])", 1, k.meta, other) is None  # without: let through
    finally:
        rc.close()


@pytest.mark.parametrize("name", ["docs", "a.b", "x-y_0"])  # crawl names: no braces (check_name)
def test_each_partition_is_one_slot_and_the_control_keys_another(name: str) -> None:
    """A partition's keys (every host script's, its hosts') share its tag; the control keys
    (the heartbeat's and leaving's control half) share the crawl's; partitions differ."""
    control = Keys(name)
    f = PartedFrontier.__new__(PartedFrontier)  # pkeys needs only parts and proc
    f.proc, f.parts = "host:1:ab", [Keys(name, p) for p in range(8)]
    slots = set()
    for p, k in enumerate(f.parts):
        keys = [*f.pkeys(p, k.hq("www.example.com"), k.h("www.example.com")), k.bell, k.held("other:2:cd")]
        assert keys[0] == k.prefix + "meta" and k.prefix == f"crawltop:{{{name}:{p}}}:"
        assert len({key_slot(key.encode()) for key in keys}) == 1, (name, p)
        slots.add(key_slot(keys[0].encode()))
    ctl = [control.procs, control.beats, control.snap("p"), control.ctl, control.ctl_of("p"), control.ignores,
           control.meta, control.left]
    assert len({key_slot(key.encode()) for key in ctl}) == 1
    assert len(slots) == 8 and key_slot(control.meta.encode()) not in slots
