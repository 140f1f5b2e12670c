"""JSON through orjson where it is installed: a record and a control message are made on
every URL and every frame, and orjson writes one in a third of the time of the standard
encoder (BENCHMARKS.md, "Speed on one core"). The standard library stays the fallback,
and is asked whatever orjson refuses (an integer past 64 bits, a lone surrogate), so such a
value is written as before or refused in json's words. Where orjson differs from json:
NaN and infinities become null (json with allow_nan=False refuses them, as the protocol
always did); dataclasses, datetimes and enums are written; on reading, an integer past 64
bits becomes a float. Nothing crawltop sends is any of these."""
from __future__ import annotations

import json
from typing import Any

try:
    import orjson
except ImportError:  # pragma: no cover - orjson is a dependency; the fallback is for odd platforms
    orjson = None  # type: ignore[assignment]

_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False, allow_nan=False)
DecodeError = json.JSONDecodeError  # orjson's is a subclass of it


def dumps(obj: Any) -> bytes:
    """Compact UTF-8 JSON, as json.dumps(separators=(",", ":"), ensure_ascii=False)."""
    if orjson is not None:
        try:
            return orjson.dumps(obj, option=orjson.OPT_NON_STR_KEYS)
        except TypeError:  # orjson.JSONEncodeError is one
            pass  # json.dumps says what is wrong, or writes what orjson will not
    return _ENCODER.encode(obj).encode()


def dumps_str(obj: Any) -> str:
    """dumps() as text (for a text file or a SQL column)."""
    if orjson is not None:
        try:
            return orjson.dumps(obj, option=orjson.OPT_NON_STR_KEYS).decode()
        except TypeError:  # orjson.JSONEncodeError is one
            pass
    return _ENCODER.encode(obj)


def loads(data: bytes | str) -> Any:
    """json.loads; raises DecodeError (or UnicodeDecodeError) on what is not JSON."""
    if orjson is not None:
        return orjson.loads(data)
    return json.loads(data)
