"""Every multi-step change to a shared crawl, each one Lua script run atomically by Redis.

Time is the server's (TIME), so machines with skewed clocks agree on lease deadlines
and host delays. Links ride along with pop and done (ARGV pairs fingerprint, item) so
a page costs one round trip to take and one to finish. `finished` is decided inside
pop and done: the queue is empty and no URL is leased, in one atomic step.
"""
from __future__ import annotations

# Shared prelude: now (ms), link adds, the finish check, reaping expired leases.
_PRELUDE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function add_links(seen, q, cap, first, last)
  -- ARGV[first..last]: pairs of fingerprint, item; cap is --max-pages (0: none)
  local new = 0
  for i = first, last, 2 do
    if cap > 0 and redis.call('SCARD', seen) >= cap then break end
    if redis.call('SADD', seen, ARGV[i]) == 1 then
      redis.call('RPUSH', q, ARGV[i + 1])
      new = new + 1
    end
  end
  return new
end
local function finish_if_done(q, leases, meta)
  if redis.call('LLEN', q) == 0 and redis.call('ZCARD', leases) == 0
     and redis.call('HGET', meta, 'status') == 'running' then
    redis.call('HSET', meta, 'status', 'finished')
  end
  return redis.call('HGET', meta, 'status')
end
"""

# KEYS: q leases owner held seen meta   ARGV: proc n lease_ms prefix max_pages (fp item)...
POP = _PRELUDE + """
local q, leases, owner, held, seen, meta = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local proc, n, lease_ms, prefix = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local new = add_links(seen, q, tonumber(ARGV[5]), 6, #ARGV)
-- reap: a dead process's URLs go back to the head of the queue, one try spent
for _, raw in ipairs(redis.call('ZRANGEBYSCORE', leases, '-inf', now, 'LIMIT', 0, 100)) do
  local it = cjson.decode(raw)
  local holder = redis.call('HGET', owner, it[1])
  if holder then redis.call('SREM', prefix .. 'held:' .. holder, raw) end
  redis.call('HDEL', owner, it[1])
  redis.call('ZREM', leases, raw)
  it[4] = it[4] + 1
  redis.call('LPUSH', q, cjson.encode(it))
  redis.call('HINCRBY', meta, 'reaped', 1)
end
local out = {}
if redis.call('HGET', meta, 'status') == 'running' then
  for i = 1, n do
    local raw = redis.call('LPOP', q)
    if not raw then break end
    redis.call('ZADD', leases, now + lease_ms, raw)
    redis.call('HSET', owner, cjson.decode(raw)[1], proc)
    redis.call('SADD', held, raw)
    out[#out + 1] = raw
  end
end
local status = finish_if_done(q, leases, meta)
return {out, status, new, redis.call('LLEN', q), redis.call('SCARD', seen)}
"""

# KEYS: q leases owner held seen meta rec count
# ARGV: proc max_pages, then per finished URL: raw url record back n (fp item)*n
# Every URL this process finished in a moment, in one call (one round trip and one script
# run for the lot). record == '' means: give the URL back to the queue (a cancelled
# worker) as the item `back` instead of recording it. A process whose lease was taken
# writes nothing. Each URL's links are counted as its record's new links. A batch sent
# again after a lost reply finds its leases gone: its URLs count as `rejected` then,
# though the first run recorded them.
DONE = _PRELUDE + """
local q, leases, owner, held, seen, meta, rec, count = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local proc, cap = ARGV[1], tonumber(ARGV[2])
local i, accepted, rejected = 3, 0, 0
while i <= #ARGV do
  local raw, url, record, back, n = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], tonumber(ARGV[i + 4])
  local last = i + 4 + 2 * n
  local new = add_links(seen, q, cap, i + 5, last)
  i = last + 1
  if redis.call('HGET', owner, url) == proc and redis.call('ZREM', leases, raw) == 1 then
    redis.call('HDEL', owner, url)
    redis.call('SREM', held, raw)
    if record == '' then
      redis.call('LPUSH', q, back)
    else
      redis.call('XADD', rec, '*', 'url', url, 'data', record, 'new', new, 'proc', proc)
      accepted = accepted + 1
    end
  else
    rejected = rejected + 1
  end
end
if accepted > 0 then redis.call('HINCRBY', count, 'records', accepted) end
if rejected > 0 then redis.call('HINCRBY', count, 'rejected', rejected) end
local status = finish_if_done(q, leases, meta)
return {accepted, status, rejected, redis.call('LLEN', q), redis.call('SCARD', seen)}
"""

# KEYS: q seen   ARGV: max_pages (fp item)...   (links found outside a page: roots, seeds, sitemaps)
ADD = _PRELUDE + """
local new = add_links(KEYS[2], KEYS[1], tonumber(ARGV[1]), 2, #ARGV)
return {new, redis.call('LLEN', KEYS[1]), redis.call('SCARD', KEYS[2])}
"""

# KEYS: q leases owner held   ARGV: proc lease_ms raw...
# Live ignores: take these items off the queue and lease them to the caller, who records
# each (error_kind "ignored") and finishes it with DONE. An item another process popped
# meanwhile is not ours: LREM finds nothing and it is skipped.
REMOVE = _PRELUDE + """
local out = {}
for i = 3, #ARGV do
  local raw = ARGV[i]
  if redis.call('LREM', KEYS[1], 1, raw) == 1 then
    redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), raw)
    redis.call('HSET', KEYS[3], cjson.decode(raw)[1], ARGV[1])
    redis.call('SADD', KEYS[4], raw)
    out[#out + 1] = raw
  end
end
return out
"""

# KEYS: held leases procs beats snap meta ctl ctlproc q seen count ignores
# ARGV: proc lease_ms info snapshot snap_ttl_ms raw...
# Renew exactly the leases this process knows it holds (XX: a reaped one is not revived;
# one a lost reply leased to us unknowingly runs out and is reaped), say who we are, and
# read back control and totals, all in one round trip.
BEAT = _PRELUDE + """
local leases = KEYS[2]
local deadline = now + tonumber(ARGV[2])
for i = 6, #ARGV do
  redis.call('ZADD', leases, 'XX', deadline, ARGV[i])
end
redis.call('HSET', KEYS[3], ARGV[1], ARGV[3])
redis.call('HSET', KEYS[4], ARGV[1], now)
if ARGV[4] ~= '' then redis.call('SET', KEYS[5], ARGV[4], 'PX', tonumber(ARGV[5])) end
return {redis.call('HGETALL', KEYS[7]), redis.call('HGETALL', KEYS[8]), redis.call('HGET', KEYS[6], 'status'),
        redis.call('LLEN', KEYS[9]), redis.call('SCARD', KEYS[10]), redis.call('ZCARD', leases),
        redis.call('HGET', KEYS[11], 'records') or 0, redis.call('LRANGE', KEYS[9], 0, 9),
        redis.call('HKEYS', KEYS[12])}
"""

# KEYS: beats meta   ARGV: proc live_ms claim
# Who writes the whole crawl's report: once the crawl is finished and no other process
# has beaten within live_ms, the first to ask with claim=1 takes it (HSETNX), so exactly
# one does; asking again gives the same answer (a retry after a lost reply).
# Returns {processes still live, status, 1 if this process holds the report}.
_LIVE = """
local function live_or_claim(beats_key, meta, proc, live_ms, claim)
  local live = 0
  local beats = redis.call('HGETALL', beats_key)
  for i = 2, #beats, 2 do
    if beats[i - 1] ~= proc and tonumber(beats[i]) >= now - live_ms then live = live + 1 end
  end
  local status = redis.call('HGET', meta, 'status')
  local mine = 0
  if live == 0 and status == 'finished' and claim == '1' then
    redis.call('HSETNX', meta, 'reporter', proc)
    if redis.call('HGET', meta, 'reporter') == proc then mine = 1 end
  end
  return {live, status, mine}
end
"""

# KEYS: held leases owner q procs beats snap ctlproc meta left
# ARGV: proc live_ms claim final_snapshot final_ttl_ms
# A process leaving: whatever it still holds goes back to the head of the queue, its
# rows go, its final snapshot stays a while for the monitors (what it did still counts
# in their totals); then LIVE's answer (the last one out writes the final report).
LEAVE = _PRELUDE + _LIVE + """
for _, raw in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  if redis.call('ZREM', KEYS[2], raw) == 1 then
    redis.call('HDEL', KEYS[3], cjson.decode(raw)[1])
    redis.call('LPUSH', KEYS[4], raw)
  end
end
redis.call('DEL', KEYS[1], KEYS[8])
redis.call('SET', KEYS[7], ARGV[4], 'PX', tonumber(ARGV[5]))
redis.call('SADD', KEYS[10], ARGV[1])
redis.call('PEXPIRE', KEYS[10], tonumber(ARGV[5]))
redis.call('HDEL', KEYS[5], ARGV[1])
redis.call('HDEL', KEYS[6], ARGV[1])
return live_or_claim(KEYS[6], KEYS[9], ARGV[1], tonumber(ARGV[2]), ARGV[3])
"""

LIVE = _PRELUDE + _LIVE + """
return live_or_claim(KEYS[1], KEYS[2], ARGV[1], tonumber(ARGV[2]), ARGV[3])
"""

# KEYS: gate slots   ARGV: token per_host delay_ms slot_ttl_ms
# Per-host politeness for the whole cluster. Returns {-1, retry_ms} when --per-host
# requests are already in progress; else reserves the next start time and a slot and
# returns {wait_ms}: the caller sleeps that long, then fetches.
GATE = _PRELUDE + """
local per_host, delay = tonumber(ARGV[2]), tonumber(ARGV[3])
if per_host > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
  if redis.call('ZCARD', KEYS[2]) >= per_host then
    return {-1, 20}
  end
end
local start = math.max(now, tonumber(redis.call('HGET', KEYS[1], 'next') or 0))
if delay > 0 then
  redis.call('HSET', KEYS[1], 'next', start + delay)
  redis.call('PEXPIRE', KEYS[1], start - now + delay + 60000)
end
if per_host > 0 then
  redis.call('ZADD', KEYS[2], start + tonumber(ARGV[4]), ARGV[1])
  redis.call('PEXPIRE', KEYS[2], start - now + tonumber(ARGV[4]) + 60000)
end
return {start - now}
"""
