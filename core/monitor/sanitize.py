"""Server text is untrusted: strip what could drive the terminal before showing it."""
import re

# C0 and C1 control characters (ESC included), DEL, and bidi overrides.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def clean(text: object, limit: int = 500) -> str:
    """Make arbitrary text safe to print: controls become '?', long text is cut."""
    s = _CONTROL.sub("?", str(text))
    return s if len(s) <= limit else s[: limit - 1] + "…"
