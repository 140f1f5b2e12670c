"""A real DNS server on loopback UDP, for the resolver's tests (tests/engine/test_dns.py) and
bench/dns_lookups.py: each name gets one behaviour, an A record, NXDOMAIN, SERVFAIL or
silence, and every query that reaches it is counted per name, so a test can say how many
lookups went out on the wire rather than how many the resolver claims it made."""
from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Mapping

from dnslib import QTYPE, RCODE, RR, A, DNSRecord

NXDOMAIN, SERVFAIL, SILENT = "nxdomain", "servfail", "silent"  # any other behaviour is an IPv4 address


def _key(name: str) -> str:
    return name.lower().rstrip(".")


class DNSServer(asyncio.DatagramProtocol):
    """Answers from `names` (name -> behaviour); a name it does not know is `default`.
    A good name has an A record and no AAAA (NOERROR, no data), as an IPv4-only host."""

    def __init__(self, names: Mapping[str, str] | None = None, default: str = NXDOMAIN) -> None:
        self.names = {_key(n): b for n, b in (names or {}).items()}
        self.default = default
        self.queries: Counter[str] = Counter()  # name -> queries of any type
        self.by_type: Counter[tuple[str, str]] = Counter()  # (name, "A" / "AAAA") -> queries
        self.address = ""  # "127.0.0.1:PORT", the form --dns-server takes
        self._transport: asyncio.DatagramTransport | None = None

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        loop = asyncio.get_running_loop()
        transport, _ = await loop.create_datagram_endpoint(lambda: self, local_addr=(host, port))
        self._transport = transport
        self.address = "{}:{}".format(*transport.get_extra_info("sockname")[:2])
        return self.address

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:  # type: ignore[override]
        try:
            request = DNSRecord.parse(data)
        except Exception:  # noqa: BLE001  (not DNS: dropped, as a server would)
            return
        name = _key(str(request.q.qname))
        qtype = QTYPE.get(request.q.qtype)
        self.queries[name] += 1
        self.by_type[(name, str(qtype))] += 1
        behaviour = self.names.get(name, self.default)
        if behaviour == SILENT:
            return
        reply = request.reply()
        if behaviour == NXDOMAIN:
            reply.header.rcode = RCODE.NXDOMAIN
        elif behaviour == SERVFAIL:
            reply.header.rcode = RCODE.SERVFAIL
        elif request.q.qtype == QTYPE.A:
            reply.add_answer(RR(request.q.qname, QTYPE.A, rdata=A(behaviour), ttl=60))
        assert self._transport is not None
        self._transport.sendto(reply.pack(), addr)
