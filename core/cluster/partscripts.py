"""The scripts of a crawl in several partitions (core/cluster/parted.py) that differ from
scripts.py's: what one script does there over control keys and host keys together is two
here, one on the control slot (`crawltop:{NAME}:`) and one per partition
(`crawltop:{NAME:K}:`), since on a Redis Cluster a script keeps to one slot.

POP, DONE, ADD, REMOVE, HOSTCTL, TURN and SEEN_* are scripts.py's, run on a partition's keys.
"""
from __future__ import annotations

from .scripts import _HOSTS, _LIVE, _NOW, SHEBANG, VIEW

# A partition's half of BEAT. Host-script KEYS and ARGV, then ARGV[14..]: lease_ms cursor
# rows (0: none) member...  Renews this process's leases there (XX, as BEAT), and reads its
# totals; with rows > 0 also the next URLs of its first due hosts and a page of host rows.
# Returns {queued, seen, leased, records, hosts, retired, over, head, cursor, rows, now}.
PBEAT = SHEBANG + _HOSTS + VIEW + """
local deadline = now + tonumber(ARGV[14])
for j = 17, #ARGV do
  redis.call('ZADD', LEASES, 'XX', deadline, ARGV[j])
end
local head, rows, cursor = {}, {}, '0'
if tonumber(ARGV[16]) > 0 then
  head = head_of()
  cursor, rows = rows_of(ARGV[15], tonumber(ARGV[16]))
end
return {num(redis.call('HGET', COUNT, 'queued')), seen_count(), redis.call('ZCARD', LEASES),
        num(redis.call('HGET', COUNT, 'records')), redis.call('SCARD', HOSTS),
        num(redis.call('HGET', COUNT, 'retired')), num(redis.call('HGET', COUNT, 'over')), head, cursor, rows, now}
"""

# The control slot's half of BEAT. KEYS: procs beats snap ctl ctlproc ignores meta
# ARGV: proc info snapshot snap_ttl_ms
# Returns {ctl, ctlproc, status, ignores, now, procs}.
CTLBEAT = SHEBANG + _NOW + """
local proc = ARGV[1]
redis.call('HSET', KEYS[1], proc, ARGV[2])
redis.call('HSET', KEYS[2], proc, now)
if ARGV[3] ~= '' then redis.call('SET', KEYS[3], ARGV[3], 'PX', tonumber(ARGV[4])) end
return {redis.call('HGETALL', KEYS[4]), redis.call('HGETALL', KEYS[5]), redis.call('HGET', KEYS[7], 'status'),
        redis.call('HKEYS', KEYS[6]), now, redis.call('HKEYS', KEYS[1])}
"""

# A partition's half of LEAVE: whatever this process still holds there goes back first in
# its hosts' queues, and it is no longer idle there.
GIVEBACK = SHEBANG + _HOSTS + """
give_back_held()
return 1
"""

# The control slot's half of LEAVE. KEYS: procs beats snap ctlproc left meta
# ARGV: proc live_ms claim final_snapshot final_ttl_ms unused_pages
# Its rows go, its final snapshot stays a while for the monitors, what it took of
# --max-pages and did not use goes back; then LIVE's answer.
DEPART = SHEBANG + _NOW + _LIVE + """
local proc = ARGV[1]
redis.call('DEL', KEYS[4])
redis.call('SET', KEYS[3], ARGV[4], 'PX', tonumber(ARGV[5]))
redis.call('SADD', KEYS[5], proc)
redis.call('PEXPIRE', KEYS[5], tonumber(ARGV[5]))
redis.call('HDEL', KEYS[1], proc)
redis.call('HDEL', KEYS[2], proc)
if tonumber(ARGV[6]) > 0 then redis.call('HINCRBY', KEYS[6], 'granted', -tonumber(ARGV[6])) end
return live_or_claim(KEYS[2], KEYS[6], proc, tonumber(ARGV[2]), ARGV[3])
"""

# KEYS: meta (control)   ARGV: max_pages block
# A block of --max-pages for one process: what is left of it, at most `block`; a negative
# block is given back.
GRANT = SHEBANG + """
local max, block = tonumber(ARGV[1]), tonumber(ARGV[2])
if block < 0 then
  redis.call('HINCRBY', KEYS[1], 'granted', block)
  return block
end
local got = math.max(0, math.min(block, max - (tonumber(redis.call('HGET', KEYS[1], 'granted')) or 0)))
if got > 0 then redis.call('HINCRBY', KEYS[1], 'granted', got) end
return got
"""

# KEYS: meta (control). The crawl is finished (core/cluster/finish.py found every partition
# empty twice over): said once, and only if it was running (a stop stays a stop).
FINISHED = SHEBANG + """
if redis.call('HGET', KEYS[1], 'status') == 'running' then redis.call('HSET', KEYS[1], 'status', 'finished') end
return redis.call('HGET', KEYS[1], 'status')
"""

# KEYS: a partition's count leases. Its part of one pass of the finish check.
EMPTY = SHEBANG + """
local c = redis.call('HMGET', KEYS[1], 'queued', 'ch')
return {tonumber(c[1]) or 0, redis.call('ZCARD', KEYS[2]), tonumber(c[2]) or 0}
"""

# KEYS: a partition's rec count   ARGV: proc (url data)...
# The Records of URLs a browser tab claimed (they have no lease to ride a DONE with).
RECORDS = SHEBANG + """
for i = 2, #ARGV, 2 do
  redis.call('XADD', KEYS[1], '*', 'url', ARGV[i], 'data', ARGV[i + 1], 'new', 0, 'proc', ARGV[1])
end
redis.call('HINCRBY', KEYS[2], 'records', (#ARGV - 1) / 2)
return 1
"""
