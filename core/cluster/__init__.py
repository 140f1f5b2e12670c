"""One crawl across many processes and machines, its shared state in Redis.

keys.py says where everything lives; scripts.py holds every atomic step as a Lua script;
frontier.py is the `Frontier` the workers use; member.py a process's heartbeat, leases
and control; gate.py per-host politeness across processes; server.py a private
redis-server. Nothing here imports Textual.
"""
