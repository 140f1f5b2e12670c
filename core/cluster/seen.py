"""The seen set of a shared crawl: exact, about 10 bytes a URL (docs/scaling.md, "Memory in Redis").

A URL's fingerprint is 64 bits of blake2b, sent as a signed decimal integer: Redis keeps a
set of such integers as an *intset*, a sorted array of 8-byte integers, as long as it holds
at most `set-max-intset-entries` (512 by default) members; past that it becomes a hash
table at about 56 bytes a member. So the fingerprints are spread over buckets that each stay
under that limit:

- **Planned:** 2^b buckets, `seen:I` (I: the fingerprint's top b bits), b chosen at the
  crawl's creation from the URLs it expects (`--expect-urls`), so that a bucket holds half
  the limit on average: room for the unlucky ones. b and the limit are stored in the crawl's
  meta (`sb`, `sl`), read by every script that adds or looks up.
- **Past the plan:** a bucket that holds the limit is full, and never grows: a fingerprint
  that is not in it goes one level down, to `seen:I.0` or `seen:I.1` by its next bit, and
  so on (`seen:I.01`, ...). Each level down halves the share a bucket gets, so ten times the
  plan fills about three levels under each bucket. A lookup walks the same path: a member of
  a bucket on the way is seen; a bucket on the way that is not full ends the walk (nothing
  was ever put below a bucket that is not full, because members are never removed).

Every SADD and SISMEMBER of the seen set is `seen_add` or `seen_has` below, in Lua (the host
scripts and SEEN_ADD, SEEN_HAS, which the Python side calls from `RedisFrontier`). The
count of fingerprints is the `seen` field of `count`: a sum over buckets would be a scan.
Lua's numbers are doubles, so a bucket is taken from the fingerprint's top bits as a double
reads them: rounded, but the same string always rounds the same way, which is all a bucket
needs; the member itself is the exact integer string. (A fingerprint just under 0 rounds up
to 2^64 and so to bucket 2^b, one past the plan: a bucket like any other.)
"""
from __future__ import annotations

import math
from hashlib import blake2b

PLANNED = 1_000_000  # URLs a crawl expects unless told (--expect-urls): 4,096 buckets
INTSET_MAX = 512  # Redis's default set-max-intset-entries: a server that hides CONFIG is taken to have it
LIMIT_MAX = 4096  # a larger intset costs more per insert (an array moved): no bigger buckets than this
MAX_BITS = 24  # 16 million buckets: a plan of 4 billion URLs


def fingerprint(url: str) -> str:
    """64 bits of blake2b as a signed decimal integer, which Redis stores as an intset member.
    Two different URLs are taken as one with odds of about n²/2⁶⁵."""
    digest = blake2b(url.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return str(int.from_bytes(digest, "big", signed=True))


def plan(expect_urls: int, limit: int) -> int:
    """b: the number of top bits that pick a bucket, so that `expect_urls` URLs fill each of
    the 2^b buckets to half of `limit` on average."""
    per = max(1, limit // 2)
    return max(0, min(MAX_BITS, math.ceil(math.log2(max(1, expect_urls) / per)))) if expect_urls > per else 0


def limit_of(config_value: object) -> int:
    """The bucket size from the server's set-max-intset-entries (CONFIG GET's answer)."""
    try:
        n = int(str(config_value))
    except ValueError:
        return INTSET_MAX
    return max(16, min(LIMIT_MAX, n))


# Lua, for every script that adds to or reads the seen set: SEEN (KEYS: the crawl's `seen`,
# whose name prefixes every bucket), META and COUNT must be bound before it.
LUA = """
local SEEN_BITS, SEEN_MAX, SEEN_N
local SEEN_NEW = 0  -- added by this call, counted in COUNT by seen_flush() once
local function seen_conf()
  if not SEEN_BITS then
    local c = redis.call('HMGET', META, 'sb', 'sl')
    SEEN_BITS, SEEN_MAX = tonumber(c[1]) or 12, tonumber(c[2]) or 512
    SEEN_N = tonumber(redis.call('HGET', COUNT, 'seen')) or 0
  end
end
-- The planned bucket of a fingerprint, and the bits below it that pick the levels down.
local function seen_start(fp)
  local x = tonumber(fp)
  if x < 0 then x = x + 18446744073709551616 end
  local hi = math.floor(x / 4294967296)
  local width = 32 - SEEN_BITS
  local below = 2 ^ width
  return SEEN .. ':' .. math.floor(hi / below), hi % below, width
end
local function seen_next(key, d, rest, width)
  local bit = math.floor(rest / 2 ^ (width - 1 - d)) % 2
  if d == 0 then return key .. '.' .. bit end
  return key .. bit
end
-- 1 if fp was new (added), 0 if it was seen already.
local function seen_add(fp)
  seen_conf()
  local key, rest, width = seen_start(fp)
  for d = 0, width do
    if redis.call('SCARD', key) < SEEN_MAX or d == width then
      local added = redis.call('SADD', key, fp)
      SEEN_N, SEEN_NEW = SEEN_N + added, SEEN_NEW + added
      return added
    end
    if redis.call('SISMEMBER', key, fp) == 1 then return 0 end
    key = seen_next(key, d, rest, width)
  end
  return 0
end
local function seen_has(fp)
  seen_conf()
  local key, rest, width = seen_start(fp)
  for d = 0, width do
    if redis.call('SISMEMBER', key, fp) == 1 then return 1 end
    if redis.call('SCARD', key) < SEEN_MAX then return 0 end
    key = seen_next(key, d, rest, width)
  end
  return 0
end
local function seen_count()
  seen_conf()
  return SEEN_N
end
local function seen_flush()
  if SEEN_NEW > 0 then
    redis.call('HINCRBY', COUNT, 'seen', SEEN_NEW)
    SEEN_NEW = 0
  end
end
"""
