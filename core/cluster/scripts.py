"""Every multi-step change to a shared crawl, each one Lua script run atomically by Redis.

What each script does, and why time is the server's: docs/scaling.md ("The guarantees,
and how"); the calling convention of the host scripts is at `_HOSTS` below.
"""
from __future__ import annotations

from ..queueing.politeness import NEVER_ANSWERED_STRIKES
from . import seen

# Fields of h:HOST that BEAT reads back for the queues view, in this order.
HOST_FIELDS = ("n", "d", "src", "f", "x", "u", "w", "o", "p", "r", "ok", "er", "ms", "le", "k", "an", "l")

SHEBANG = "#!lua\n"  # flags on: on a cluster, Redis refuses a key outside the slot of the declared ones

_NOW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
"""

# Shared prelude of the host scripts: one calling convention, so one helper in
# core/cluster/frontier.py builds every call; link adds, scheduling, the finish check
# (nothing queued and no URL leased, decided inside pop and done), releasing a lease.
#   KEYS  meta count ready later leases owner held:PROC seen rec hosts idle checks
#         idle:checks [script's own from KEYS[14]...]
#   ARGV  prefix proc delay_ms per_host max_crawl_delay_ms delay_factor max_failures
#         budget backoff_ms max_backoff_ms max_pages one_until_answered (1|0) now_ms
#         [script's own from ARGV[14]...]
# A host's own keys (hq:HOST, h:HOST) are built from the prefix inside the script: the
# crawl's hash tag keeps them on the same shard. Time is the server's (TIME, when now_ms
# is ''; every crawl's call): machines with skewed clocks agree on lease deadlines and
# host delays. A number instead is the time for that call: the tests of the formulas
# (tests/cluster/test_cluster_policy.py) pass their own, exact to the millisecond.
# Two lanes (core/queueing/hosts.py PAGES, CHECKS): each host is in one (h:HOST's `l`, set
# when its first URL is queued, moved by an `l` event), each lane has its own due order
# and its own idle processes, so a POP for one lane never scans the other's hosts.
_HOSTS = """
local now = tonumber(ARGV[13])
if not now then  -- '': the server's clock
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local META, COUNT, READY, LATER, LEASES, OWNER, HELD, SEEN, REC, HOSTS, IDLE =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10], KEYS[11]
local READIES, IDLES = {[0] = READY, [1] = KEYS[12]}, {[0] = IDLE, [1] = KEYS[13]}
""" + seen.LUA + """
local NEVER = """ + str(NEVER_ANSWERED_STRIKES) + """
-- Every key is KEYS' or built from the prefix of KEYS[1] (meta), so it carries the crawl's
-- hash tag: one slot by construction (a host key's own braces come after the tag, which is
-- the first pair), and `#!lua` has Redis refuse any other.
local P, PROC = string.sub(KEYS[1], 1, -5), ARGV[2]
local DELAY, CAP, MAXCD, FACTOR = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local MAXFAIL, BUDGET, BACKOFF, MAXBACKOFF = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10])
local MAXPAGES = tonumber(ARGV[11])
-- One partition of several (meta's `part`): it never decides alone that the crawl is
-- finished (core/cluster/finish.py reads every partition), and MAXPAGES is what this call may
-- add to the seen set (the caller's share of --max-pages, taken in blocks; -1: nothing).
local PARTED = redis.call('HEXISTS', META, 'part') == 1
local TAKEN = 0  -- URLs this call added to the seen set
local ONE = ARGV[12] == '1'  -- one request at a time to a host until it answers (Politeness.one_until_answered)
-- The policy's formulas (core/queueing/politeness.py) in Lua: cap_of, strike_limit,
-- recompute (delay_of), gap (gap_after), and in DONE's `f` the back-off (backoff_until).
local function hk(h) return P .. 'h:' .. h end
local function qk(h) return P .. 'hq:' .. h end
local function num(v) return tonumber(v) or 0 end
-- A host's browser-tab requests out now (TURN grants them, TURN_END gives them back): they
-- count against its cap as leased fetches do, until `te`, when a dead engine's are forgotten.
local function tabs(tf, te)
  if num(te) > now then return num(tf) end
  return 0
end
local function split(m)
  local sp = string.find(m, ' ', 1, true)
  return string.sub(m, 1, sp - 1), string.sub(m, sp + 1)
end
local function delay_of(h)
  local d = redis.call('HGET', hk(h), 'd')
  if d then return tonumber(d) end
  return DELAY
end
-- A host that never answered (`an` unset: no HTTP response of any status yet), or stopped
-- answering (strikes), gets one request at a time, across every process, until it answers:
-- a dead host costs a few connections, not the crawl's workers.
local function cap_of(strikes, answered)
  if num(strikes) > 0 or (ONE and answered ~= '1') then return 1 end
  return CAP
end
-- Strikes in a row that retire it: fewer for a host that never answered at all.
local function strike_limit(answered)
  if answered == '1' then return MAXFAIL end
  return math.min(MAXFAIL, NEVER)
end
local function ready_of(lane)
  if lane == '1' then return READIES[1] end
  return READY  -- the pages lane; a host from before the lanes has none
end
-- (Re)place the host in its lane's ready order from its state, or take it out
-- (core/queueing/hosts.py _schedule).
local function schedule(h)
  local s = redis.call('HMGET', hk(h), 'n', 'u', 'f', 'p', 'r', 'k', 'an', 'l', 'tf', 'te')
  local q = ready_of(s[8])
  local cap = cap_of(s[6], s[7])
  if s[4] == '1' or redis.call('LLEN', qk(h)) == 0 then
    redis.call('ZREM', q, h)
  elseif s[5] == '1' then
    redis.call('ZADD', q, 0, h)
  elseif cap > 0 and num(s[3]) >= cap then
    redis.call('ZREM', q, h)
  elseif cap > 0 and num(s[3]) + tabs(s[9], s[10]) >= cap then
    -- full with tab requests: due again when they are forgotten at the latest (TURN_END
    -- places it sooner), so a host whose tabs' engine died is never left out
    redis.call('ZADD', q, math.max(num(s[1]), num(s[2]), num(s[10])), h)
  else
    redis.call('ZADD', q, math.max(num(s[1]), num(s[2])), h)
  end
end
-- The delay is the largest of its sources; the source is kept to be shown.
local function recompute(h)
  local s = redis.call('HMGET', hk(h), 'cd', 'ad', 'lv')
  local d, src = DELAY, ''
  if DELAY > 0 then src = 'delay' end
  local cd = num(s[1])
  if math.min(cd, MAXCD) > d then
    d = math.min(cd, MAXCD)
    if cd > MAXCD then src = 'robots (capped)' else src = 'robots' end
  end
  if num(s[2]) > d then d, src = num(s[2]), 'adaptive' end
  if s[3] and num(s[3]) >= d then d, src = num(s[3]), 'live' end
  redis.call('HSET', hk(h), 'd', d, 'src', src)
end
-- The gap counts from when the request went out (started_ago ms before now).
local function gap(h, started_ago)
  local d = delay_of(h)
  if d <= 0 then return end
  local at = now - started_ago + d
  if at > num(redis.call('HGET', hk(h), 'n')) then
    redis.call('HSET', hk(h), 'n', at)
    schedule(h)
  end
end
-- Every change of what is queued or leased bumps `ch`: the finish check over partitions
-- reads it twice, and a partition that changed in between is not taken for empty.
local function changed() redis.call('HINCRBY', COUNT, 'ch', 1) end
local function full()
  if MAXPAGES == 0 then return false end
  if PARTED then return TAKEN >= MAXPAGES end
  return seen_count() >= MAXPAGES
end
local function push(h, raw, front)
  if front then redis.call('LPUSH', qk(h), raw) else redis.call('RPUSH', qk(h), raw) end
  redis.call('HINCRBY', COUNT, 'queued', 1)
  changed()
  schedule(h)
end
local function add_links(first, last)
  -- ARGV[first..last]: quadruplets of fingerprint, host, lane (its host's, if it is new), item
  local new = 0
  for i = first, last, 4 do
    if full() then break end
    if seen_add(ARGV[i]) == 1 then
      TAKEN = TAKEN + 1
      local h = ARGV[i + 1]
      local admit = true
      if BUDGET > 0 then
        if num(redis.call('HGET', hk(h), 'a')) >= BUDGET then
          redis.call('HINCRBY', hk(h), 'o', 1)
          redis.call('HINCRBY', COUNT, 'over', 1)
          redis.call('SADD', HOSTS, h)
          admit = false
        else
          redis.call('HINCRBY', hk(h), 'a', 1)
        end
      end
      if admit then
        if redis.call('RPUSH', qk(h), ARGV[i + 3]) == 1 then  -- the host's queue was empty
          redis.call('SADD', HOSTS, h)
          redis.call('HSETNX', hk(h), 'l', ARGV[i + 2])  -- its lane is its first URL's
          schedule(h)
        end
        new = new + 1
      end
    end
  end
  if new > 0 then
    redis.call('HINCRBY', COUNT, 'queued', new)
    changed()
  end
  seen_flush()
  return new
end
-- A process whose last POP for a lane found nothing due is in that lane's IDLE and sleeps
-- until its first host is due; when a change here makes a host of the lane due now (a slot
-- freed, links, a resume) or ends the crawl, ring it (PUBLISH the lane on P..'bell'), so
-- it pops at once instead of polling. Only a lane with idle processes rings.
-- In a partition, an ADD or DONE that brings a lane's first due host forward (`was`: each
-- lane's first due time when the call began) says so to every process, "LANE:MS" (ms from
-- now): the others ask a partition when the last reply they had from it said it comes due,
-- and this is news to them.
local function firsts()
  if not PARTED then return nil end
  local out = {}
  for lane = 0, 1 do
    local f = redis.call('ZRANGE', READIES[lane], 0, 0, 'WITHSCORES')
    out[lane] = #f > 0 and tonumber(f[2]) or false
  end
  return out
end
local function bell(status, was)
  for lane = 0, 1 do
    if redis.call('HLEN', IDLES[lane]) > 0 and (status ~= 'running'
        or #redis.call('ZRANGEBYSCORE', READIES[lane], '-inf', now, 'LIMIT', 0, 1) > 0) then
      redis.call('PUBLISH', P .. 'bell', lane)
    elseif was and status == 'running' then
      local f = redis.call('ZRANGE', READIES[lane], 0, 0, 'WITHSCORES')
      if #f > 0 and (not was[lane] or tonumber(f[2]) < was[lane]) then
        redis.call('PUBLISH', P .. 'bell', lane .. ':' .. math.max(0, tonumber(f[2]) - now))
      end
    end
  end
end
-- When the lane's first host here comes due (ms from now; -1: nothing could), counting
-- retries waiting out a back-off and, in a partition, leases that run out (a POP here reaps
-- them): POP's answer, and what a crawl in partitions keeps per partition to ask only the
-- due ones (wakes(), in ADD's and DONE's replies).
local function wake_of(lane)
  local wake = -1
  local sets = {READIES[lane], LATER}
  if PARTED then sets[3] = LEASES end
  for _, key in ipairs(sets) do
    local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    local ms = #first > 0 and math.max(0, tonumber(first[2]) - now) or -1
    if ms >= 0 and (wake < 0 or ms < wake) then wake = ms end
  end
  return wake
end
local function wakes()
  return {wake_of(0), wake_of(1)}
end
local function finish_if_done()
  if PARTED then return redis.call('HGET', META, 'status') end
  if num(redis.call('HGET', COUNT, 'queued')) == 0 and redis.call('ZCARD', LEASES) == 0
     and redis.call('HGET', META, 'status') == 'running' then
    redis.call('HSET', META, 'status', 'finished')
  end
  return redis.call('HGET', META, 'status')
end
-- A leased URL is over (done, given back, reaped): its host has one fetch fewer in flight.
local function unflight(h)
  if redis.call('HGET', hk(h), 'r') ~= '1' and redis.call('HINCRBY', hk(h), 'f', -1) < 0 then
    redis.call('HSET', hk(h), 'f', 0)
  end
end
local function release(m, holder)
  local h, raw = split(m)
  redis.call('HDEL', OWNER, cjson.decode(raw)[1])
  redis.call('SREM', P .. 'held:' .. holder, m)
  unflight(h)
  changed()
  return h, raw
end
-- Leaving: what PROC still holds goes back first in its hosts' queues (their in-flight
-- counts come down), and it is idle no more.
local function give_back_held()
  for _, m in ipairs(redis.call('SMEMBERS', HELD)) do
    if redis.call('ZREM', LEASES, m) == 1 then
      local h, raw = release(m, PROC)
      push(h, raw, true)
    end
  end
  redis.call('DEL', HELD)
  redis.call('HDEL', IDLES[0], PROC)
  redis.call('HDEL', IDLES[1], PROC)
end
local function retire(h)
  if redis.call('HGET', hk(h), 'r') ~= '1' then
    redis.call('HSET', hk(h), 'r', 1)
    redis.call('HINCRBY', COUNT, 'retired', 1)
    schedule(h)
  end
end
-- The scope grew (a seed that moved): the host changes lanes, its place in the order with it.
local function relane(h, lane)
  redis.call('HSET', hk(h), 'l', lane)
  redis.call('ZREM', READIES[1 - lane], h)
  schedule(h)
end
"""

# ARGV[14..]: n lease_ms lane (fp host lane item)...
# Reap expired leases (a dead process's URLs go back first in their hosts' queues, one
# try spent, and their hosts' in-flight counts come down), bring due retries back, then
# take up to n URLs from the lane's due hosts, oldest-due first, taking turns: a host with a delay
# gives one URL a call and its next-allowed time moves on by its delay; a host without
# one gives its share. A retired host's URLs come out at once, flagged (delay -1), for
# their HostRetired records; each is leased, so each is recorded exactly once.
# Returns {members, delays, status, new, queued, seen, wake_ms (-1: nothing could come due)}.
POP = SHEBANG + _HOSTS + """
local n, lease, lane = tonumber(ARGV[14]), tonumber(ARGV[15]), tonumber(ARGV[16])
local moved = 0  -- URLs back in their hosts' queues (reaped, due retries): may be another lane's
local Q, IDLEQ = READIES[lane], IDLES[lane]  -- this lane's: the other's hosts are never looked at
local new = add_links(17, #ARGV)
for _, m in ipairs(redis.call('ZRANGEBYSCORE', LEASES, '-inf', now, 'LIMIT', 0, 100)) do
  local h, raw = split(m)
  local it = cjson.decode(raw)
  local holder = redis.call('HGET', OWNER, it[1])
  if holder then redis.call('SREM', P .. 'held:' .. holder, m) end
  redis.call('HDEL', OWNER, it[1])
  redis.call('ZREM', LEASES, m)
  unflight(h)
  it[4] = it[4] + 1
  push(h, cjson.encode(it), true)
  redis.call('HINCRBY', META, 'reaped', 1)
  moved = moved + 1
end
for _, m in ipairs(redis.call('ZRANGEBYSCORE', LATER, '-inf', now, 'LIMIT', 0, 100)) do
  redis.call('ZREM', LATER, m)
  redis.call('HINCRBY', COUNT, 'queued', -1)
  local h, raw = split(m)
  push(h, raw, true)
  moved = moved + 1
end
-- Fair between processes: what processes idle longer than this one (and for 50 ms at
-- least) asked for is left to them (live ones: they pop at least every second), so a
-- host freed by our own DONE is not always ours again. The lane's IDLE: proc ->
-- "since,last,n" (ms, ms, URLs wanted).
local mine = redis.call('HGET', IDLEQ, PROC)
local since = now
if mine then since = tonumber(string.match(mine, '^(%d+)')) or now end
local reserved = 0
local idle = redis.call('HGETALL', IDLEQ)
for j = 1, #idle, 2 do
  if idle[j] ~= PROC then
    local s0, last, want = string.match(idle[j + 1], '^(%d+),(%d+),(%d+)$')
    -- idle 50 ms or more: a process between two pops of a busy crawl does not count
    if s0 and tonumber(last) >= now - 1500 and tonumber(s0) < since and tonumber(s0) <= now - 50 then
      reserved = reserved + tonumber(want)
    end
  end
end
local room, can = n, 0
if reserved > 0 then  -- what the due hosts can give now: one URL from a host with a delay, more without
  for _, h in ipairs(redis.call('ZRANGEBYSCORE', Q, '-inf', now, 'LIMIT', 0, n + reserved)) do
    local s = redis.call('HMGET', hk(h), 'd', 'f', 'r', 'k', 'an', 'tf', 'te')
    local cap = cap_of(s[4], s[5])
    if s[3] ~= '1' and (tonumber(s[1]) or DELAY) > 0 then
      can = can + 1
    else
      local k = redis.call('LLEN', qk(h))
      if s[3] ~= '1' and cap > 0 then k = math.max(0, math.min(k, cap - num(s[2]) - tabs(s[6], s[7]))) end
      can = can + k
    end
    if can >= n + reserved then break end
  end
  room = math.max(0, math.min(n, can - reserved))
end
local out, delays = {}, {}
if redis.call('HGET', META, 'status') == 'running' then
  n = room
  while #out < n do
    local due = redis.call('ZRANGEBYSCORE', Q, '-inf', now, 'LIMIT', 0, n - #out)
    if #due == 0 then break end
    local share = math.ceil((n - #out) / #due)
    for _, h in ipairs(due) do
      local s = redis.call('HMGET', hk(h), 'r', 'f', 'd', 'k', 'an', 'tf', 'te')
      local retired = s[1] == '1'
      local d = tonumber(s[3]) or DELAY
      local cap = cap_of(s[4], s[5])
      local k = 1
      if retired or d <= 0 then k = share end
      if not retired and cap > 0 then k = math.min(k, cap - num(s[2]) - tabs(s[6], s[7])) end
      k = math.min(k, n - #out)
      local took = 0
      while took < k do
        local raw = redis.call('LPOP', qk(h))
        if not raw then break end
        local m = h .. ' ' .. raw
        redis.call('ZADD', LEASES, now + lease, m)
        redis.call('HSET', OWNER, cjson.decode(raw)[1], PROC)
        redis.call('SADD', HELD, m)
        out[#out + 1] = m
        if retired then delays[#delays + 1] = -1 else delays[#delays + 1] = d end
        took = took + 1
      end
      if took > 0 then
        changed()
        redis.call('HINCRBY', COUNT, 'queued', -took)
        if not retired then
          redis.call('HINCRBY', hk(h), 'f', took)
          redis.call('HSET', hk(h), 'n', now + d)
        end
      end
      schedule(h)
      if #out >= n then break end
    end
  end
end
if #out == 0 then
  redis.call('HSET', IDLEQ, PROC, since .. ',' .. now .. ',' .. tonumber(ARGV[14]))
else
  redis.call('HDEL', IDLEQ, PROC)
end
local wake = wake_of(lane)
-- yielded what was due to processes idle longer: look again soon (nothing due: nothing yielded)
if room < tonumber(ARGV[14]) and #out == 0 and can > 0 then wake = math.max(wake, 20) end
local status = finish_if_done()
if moved > 0 then bell(status) end  -- the other lane, and processes idle here, learn of them now
return {out, delays, status, new, num(redis.call('HGET', COUNT, 'queued')), seen_count(), wake, TAKEN}
"""

# ARGV[14..]: e, then e host events of 6 args (kind host a b c why), then per finished URL:
#   member url record back after_ms err n (fp host lane item)*n
# Host events (what the fetches said, buffered by core/cluster/hosts.py):
#   g  a request went out a ms ago: the host's gap counts from it
#   s  a success, started a ms ago, latency b ms: the adaptive delay, failures reset
#   f  a failure, started a ms ago, Retry-After b ms (-1: none); c = block + 2 x strike:
#      block backs the whole host off (429, 503, unreachable), strike counts toward
#      retirement (unreachable, timeouts; core/queueing/hosts.py Hosts.failed)
#   c  robots.txt said Crawl-delay b ms (fetched a ms ago)
#   a  it sent an HTTP response (any status): its full --per-host share from now on, and
#      retired only by max_failures strikes (a success says as much)
#   r  retired now (a name that does not resolve), why: its last error
#   l  its lane is b now (the scope grew)
# URLs: record == '' gives the URL back as `back` (first in its host's queue, or in
# after_ms); else the record is written, only by the lease holder. A batch sent again
# after a lost reply finds its leases gone: its URLs count as `rejected`.
# Returns {accepted, status, rejected, queued, seen, taken}, and in a partition each lane's
# wake_ms too (wakes(): when the caller asks this partition next).
DONE = SHEBANG + _HOSTS + """
local was = firsts()
local e = tonumber(ARGV[14])
local i = 15
for _ = 1, e do
  local kind, h, a, b, c, why = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3]),
    ARGV[i + 4], ARGV[i + 5]
  i = i + 6
  local hh = hk(h)
  if kind == 'g' then
    gap(h, a)
  elseif kind == 's' then
    gap(h, a)
    if redis.call('HSETNX', hh, 'an', 1) == 1 then schedule(h) end
    redis.call('HINCRBY', hh, 'ok', 1)
    redis.call('HINCRBY', hh, 'ms', b)
    if FACTOR > 0 then
      redis.call('HSET', hh, 'ad', math.floor(FACTOR * b))
      recompute(h)
      schedule(h)
    end
    local s = redis.call('HMGET', hh, 'x', 'k', 'b')
    if (num(s[1]) > 0 or num(s[2]) > 0) and now - a >= num(s[3]) then
      redis.call('HSET', hh, 'x', 0, 'k', 0, 'w', '')
    end
  elseif kind == 'c' then
    redis.call('HSET', hh, 'cd', b)
    recompute(h)
    gap(h, a)
  elseif kind == 'f' then
    gap(h, a)
    redis.call('HSET', hh, 'le', why)
    local block, strike = tonumber(c) % 2 == 1, tonumber(c) >= 2
    local s = redis.call('HMGET', hh, 'u', 'b')
    if now - a >= num(s[2]) then  -- a request that started before the current block says nothing new
      local k = 0
      if strike then k = redis.call('HINCRBY', hh, 'k', 1) end
      if block then
        local x = redis.call('HINCRBY', hh, 'x', 1)
        local wait
        if b >= 0 then wait = math.min(b, MAXBACKOFF) else wait = math.min(MAXBACKOFF, BACKOFF * 2 ^ (x - 1)) end
        wait = math.floor(wait * (1 + (now % 101) / 1010))  -- jitter: hosts blocked together don't wake together
        redis.call('HSET', hh, 'u', math.max(num(s[1]), now + wait), 'b', now, 'w', why)
        schedule(h)
      end
      if k >= strike_limit(redis.call('HGET', hh, 'an')) then retire(h) end
    end
  elseif kind == 'a' then
    if redis.call('HSETNX', hh, 'an', 1) == 1 then schedule(h) end
  elseif kind == 'r' then
    if why ~= '' then redis.call('HSET', hh, 'le', why) end
    redis.call('SADD', HOSTS, h)
    retire(h)
  elseif kind == 'l' then
    relane(h, b)
  end
end
local accepted, rejected = 0, 0
while i <= #ARGV do
  local m, url, record, back, after, err, n = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3],
    tonumber(ARGV[i + 4]), ARGV[i + 5], tonumber(ARGV[i + 6])
  local last = i + 6 + 4 * n
  local new = add_links(i + 7, last)
  i = last + 1
  if redis.call('HGET', OWNER, url) == PROC and redis.call('ZREM', LEASES, m) == 1 then
    local h = release(m, PROC)
    if record == '' then
      if after > 0 then
        redis.call('ZADD', LATER, now + after, h .. ' ' .. back)
        redis.call('HINCRBY', COUNT, 'queued', 1)
        schedule(h)
      else
        push(h, back, true)
      end
    else
      local counted = new  -- (one partition of several: links go by ADD, the record's own count stands)
      if PARTED then counted = '' end
      redis.call('XADD', REC, '*', 'url', url, 'data', record, 'new', counted, 'proc', PROC)
      if err == '1' then redis.call('HINCRBY', hk(h), 'er', 1) end
      accepted = accepted + 1
      schedule(h)
    end
  else
    rejected = rejected + 1
  end
end
if accepted > 0 then redis.call('HINCRBY', COUNT, 'records', accepted) end
if rejected > 0 then redis.call('HINCRBY', COUNT, 'rejected', rejected) end
local status = finish_if_done()
bell(status, was)
local reply = {accepted, status, rejected, num(redis.call('HGET', COUNT, 'queued')), seen_count(), TAKEN}
if PARTED then local w = wakes() reply[7], reply[8] = w[1], w[2] end
return reply
"""

# ARGV[14..]: (fp host lane item)...   (links found outside a page: roots, seeds, sitemaps)
# Returns {new, queued, seen, taken}, and in a partition each lane's wake_ms too.
ADD = SHEBANG + _HOSTS + """
local was = firsts()
local new = add_links(14, #ARGV)
bell('running', was)
local reply = {new, num(redis.call('HGET', COUNT, 'queued')), seen_count(), TAKEN}
if PARTED then local w = wakes() reply[5], reply[6] = w[1], w[2] end
return reply
"""

# ARGV[14..]: lease_ms (host item)...
# Live ignores: take these items off their hosts' queues, or out of `later` (a URL waiting
# out a back-off of its own is queued too, as in core/queueing/hosts.py remove_if), and
# lease them to the caller, who records each (error_kind "ignored") and finishes it with
# DONE. Each is looked for in both places (a POP may have moved it from `later` to its
# queue meanwhile); one another process popped meanwhile is not ours: found in neither, skipped.
REMOVE = SHEBANG + _HOSTS + """
local lease = tonumber(ARGV[14])
local out = {}
for j = 15, #ARGV, 2 do
  local h, raw = ARGV[j], ARGV[j + 1]
  local m = h .. ' ' .. raw
  if redis.call('LREM', qk(h), 1, raw) == 1 or redis.call('ZREM', LATER, m) == 1 then
    redis.call('ZADD', LEASES, now + lease, m)
    redis.call('HSET', OWNER, cjson.decode(raw)[1], PROC)
    redis.call('SADD', HELD, m)
    if redis.call('HGET', hk(h), 'r') ~= '1' then redis.call('HINCRBY', hk(h), 'f', 1) end
    redis.call('HINCRBY', COUNT, 'queued', -1)
    changed()
    schedule(h)
    out[#out + 1] = m
  end
end
return out
"""

# KEYS[14..]: hq:HOST h:HOST   ARGV[14..]: op host [seconds_ms]
#   op: pause, resume, delay ('' ms: no live delay)
# Steering one host for the whole crawl. Returns the URLs queued for it.
HOSTCTL = SHEBANG + _HOSTS + """
local was = firsts()
local op, h = ARGV[14], ARGV[15]
redis.call('SADD', HOSTS, h)
if op == 'pause' then
  redis.call('HSET', hk(h), 'p', 1)
elseif op == 'resume' then
  redis.call('HDEL', hk(h), 'p')
elseif op == 'delay' then
  if ARGV[16] == '' then redis.call('HDEL', hk(h), 'lv') else redis.call('HSET', hk(h), 'lv', ARGV[16]) end
  recompute(h)
end
schedule(h)
bell('running', was)
return redis.call('LLEN', qk(h))
"""

# KEYS[14..]: procs beats snap ctl ctlproc ignores
# ARGV[14..]: info snapshot snap_ttl_ms lease_ms cursor rows member...
# Renew exactly the leases this process knows it holds (XX: a reaped one is not revived;
# one a lost reply leased to us unknowingly runs out and is reaped), say who we are, and
# read back control and totals, the next URLs of the first hosts due, and a page of host
# rows for the queues view (SSCAN from `cursor`: every host comes round in turn), all in
# one round trip.
# The queues view's reads (BEAT, and partscripts.PBEAT per partition): the next URLs of the
# first hosts due, the pages' lane first, and a page of host rows from `cursor` (SSCAN:
# every host comes round in turn), each row its host, queue length and HOST_FIELDS.
VIEW = """
local function head_of()
  local head = {}
  for lane = 0, 1 do
    for _, h in ipairs(redis.call('ZRANGE', READIES[lane], 0, 9 - #head)) do
      local raw = redis.call('LINDEX', qk(h), 0)
      if raw then head[#head + 1] = raw end
    end
    if #head >= 10 then break end
  end
  return head
end
local function rows_of(cursor, count)
  local rows = {}
  local scan = redis.call('SSCAN', HOSTS, cursor, 'COUNT', count)
  for _, h in ipairs(scan[2]) do
    local row = redis.call('HMGET', hk(h), """ + ", ".join(f"'{f}'" for f in HOST_FIELDS) + """)
    rows[#rows + 1] = h
    rows[#rows + 1] = redis.call('LLEN', qk(h))
    for j = 1, #row do rows[#rows + 1] = row[j] or '' end
  end
  return scan[1], rows
end
"""

BEAT = SHEBANG + _HOSTS + VIEW + """
local deadline = now + tonumber(ARGV[17])
for j = 20, #ARGV do
  redis.call('ZADD', LEASES, 'XX', deadline, ARGV[j])
end
redis.call('HSET', KEYS[14], PROC, ARGV[14])
redis.call('HSET', KEYS[15], PROC, now)
if ARGV[15] ~= '' then redis.call('SET', KEYS[16], ARGV[15], 'PX', tonumber(ARGV[16])) end
local head = head_of()
local cursor, rows = rows_of(ARGV[18], tonumber(ARGV[19]))
return {redis.call('HGETALL', KEYS[17]), redis.call('HGETALL', KEYS[18]), redis.call('HGET', META, 'status'),
        num(redis.call('HGET', COUNT, 'queued')), seen_count(), redis.call('ZCARD', LEASES),
        redis.call('HGET', COUNT, 'records') or 0, head, redis.call('HKEYS', KEYS[19]),
        now, cursor, rows, redis.call('SCARD', HOSTS), num(redis.call('HGET', COUNT, 'retired')),
        num(redis.call('HGET', COUNT, 'over'))}
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

# KEYS[14..]: procs beats snap ctlproc left
# ARGV[14..]: live_ms claim final_snapshot final_ttl_ms
# A process leaving: whatever it still holds goes back first in its hosts' queues (their
# in-flight counts come down), its rows go, its final snapshot stays a while for the
# monitors (what it did still counts in their totals); then LIVE's answer (the last one
# out writes the final report).
LEAVE = SHEBANG + _HOSTS + _LIVE + """
give_back_held()
redis.call('DEL', KEYS[17])
redis.call('SET', KEYS[16], ARGV[16], 'PX', tonumber(ARGV[17]))
redis.call('SADD', KEYS[18], PROC)
redis.call('PEXPIRE', KEYS[18], tonumber(ARGV[17]))
redis.call('HDEL', KEYS[14], PROC)
redis.call('HDEL', KEYS[15], PROC)
return live_or_claim(KEYS[15], META, PROC, tonumber(ARGV[14]), ARGV[15])
"""

LIVE = SHEBANG + _NOW + _LIVE + """
return live_or_claim(KEYS[1], KEYS[2], ARGV[1], tonumber(ARGV[2]), ARGV[3])
"""


# KEYS: any key of the crawl (it routes the call on a cluster). The server's clock, in a
# pipeline of the crawl's keys (a cluster's pipeline refuses TIME, which has no key).
CLOCK = SHEBANG + "return redis.call('TIME')"


# The seen set on its own (core/cluster/seen.py): KEYS meta count seen.
_SEEN = """
local META, COUNT, SEEN = KEYS[1], KEYS[2], KEYS[3]
local PARTED = redis.call('HEXISTS', META, 'part') == 1
""" + seen.LUA

# ARGV: cap (--max-pages: seen never passes it; 0: none; a partition of several: what this
# call may add, -1 nothing), fp...   Per fp: 1 added (new), 0 seen already, -1 refused (the cap).
SEEN_ADD = SHEBANG + _SEEN + """
local cap = tonumber(ARGV[1])
local out, taken = {}, 0
for i = 2, #ARGV do
  local full = cap ~= 0 and ((PARTED and taken >= cap) or (not PARTED and seen_count() >= cap))
  if full then out[#out + 1] = -1 else out[#out + 1] = seen_add(ARGV[i]) end
  if out[#out] == 1 then taken = taken + 1 end
end
seen_flush()
return out
"""

# ARGV: fp   1 if seen, else 0.
SEEN_HAS = SHEBANG + _SEEN + """
return seen_has(ARGV[1])
"""


# On a Redis Cluster, the first command of every script: two keys of the crawl's slot that
# never exist. While the slot is being moved to another master (resharding), its keys are
# half here, half there, and a script would read a key already moved as missing (on the
# new master, under ASKING) or fail at one on the old (after writes it cannot take back).
# Redis answers this command there with "non local key" (old master: ASK; new: TRYAGAIN)
# before the script wrote anything, so the call is an outage retried whole
# (core/cluster/link.py) until the slot has one master again. Elsewhere it costs a lookup.
SLOT_GUARD = "if KEYS[1] then redis.call('EXISTS', KEYS[1] .. ':~0', KEYS[1] .. ':~1') end\n"


def for_client(script: str, cluster: bool) -> str:
    """The script as the client's server wants it: on a Redis Cluster the bell is a sharded
    channel (SPUBLISH: core/cluster/bell.py says why), and the slot guard comes first. One
    server gets it without `#!lua`, which Redis 6 cannot compile: there one slot is moot."""
    if not cluster:
        return script[len(SHEBANG):] if script.startswith(SHEBANG) else script
    if script.startswith(SHEBANG):
        script = SHEBANG + SLOT_GUARD + script[len(SHEBANG):]
    return script.replace("redis.call('PUBLISH'", "redis.call('SPUBLISH'")


ALL = {"POP": POP, "DONE": DONE, "ADD": ADD, "REMOVE": REMOVE, "HOSTCTL": HOSTCTL, "BEAT": BEAT,
       "LEAVE": LEAVE, "LIVE": LIVE, "SEEN_ADD": SEEN_ADD, "SEEN_HAS": SEEN_HAS}


# ARGV[14..]: host lent crawl_delay_ms ('': not known) hold_ms
# A browser tab's request's turn on its host (core/fetching/tabturns.py): granted when the
# host is due (its next-allowed time and back-off passed) and under its cap, counting the
# crawl's leased fetches there (`f`, less the page's own lease `lent` to its tab) and every
# engine's tab requests out there (`tf`, which POP counts too); a grant moves its
# next-allowed time on by its delay, as POP does, and counts one more tab request out, until
# TURN_END gives it back or `hold_ms` (the page's limit) passes: an engine that dies leaves
# nothing counted for longer. A Crawl-delay the tab's rules just read is the host's from
# here (DONE's `c`).
# Returns {1 granted | 0 wait | -1 refused (paused, retired), ms until due, 1 if under its cap}.
TURN = SHEBANG + _HOSTS + """
local h, lent, hold = ARGV[14], tonumber(ARGV[15]), tonumber(ARGV[17]) or 60000
if ARGV[16] ~= '' and redis.call('HGET', hk(h), 'cd') ~= ARGV[16] then
  redis.call('HSET', hk(h), 'cd', ARGV[16])
  recompute(h)
end
local s = redis.call('HMGET', hk(h), 'n', 'u', 'f', 'p', 'r', 'k', 'an', 'd', 'tf', 'te')
if s[4] == '1' or s[5] == '1' then return {-1, 0, 0} end
local cap = cap_of(s[6], s[7])
local due = math.max(num(s[1]), num(s[2]))
local out = tabs(s[9], s[10])
local free = 0
if cap <= 0 or num(s[3]) + out - lent < cap then free = 1 end
if free == 1 and due <= now then
  redis.call('HSET', hk(h), 'n', now + (tonumber(s[8]) or DELAY), 'tf', out + 1,
             'te', math.max(num(s[10]), now + hold))
  schedule(h)
  return {1, 0, 1}
end
return {0, math.max(0, due - now), free}
"""
# ARGV[14]: host. A tab request granted by TURN is over: one fewer counted against the cap.
TURN_END = SHEBANG + _HOSTS + """
local was = firsts()
local h = ARGV[14]
local s = redis.call('HMGET', hk(h), 'tf', 'te')
local out = tabs(s[1], s[2])
if out > 0 then
  redis.call('HSET', hk(h), 'tf', out - 1)
  schedule(h)
  if was then bell('running', was) end  -- (a partition: a host freed sooner is news)
end
return out
"""
ALL["TURN"], ALL["TURN_END"] = TURN, TURN_END
