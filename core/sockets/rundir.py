"""Where live crawls listen: the per-user run directory, crawl names and their sockets.

Each running crawl binds one Unix socket, `<run dir>/<name>`; the socket's name is the
crawl's name (tmux's model). The run directory is `$CRAWLTOP_RUN_DIR` (tests), else
`$XDG_RUNTIME_DIR/crawltop/`, else `~/.local/state/crawltop/run/`. It is created 0700
and the sockets 0600, so the file permissions are the authentication: only the owner
can connect. A directory or socket owned by someone else, or a directory others can
write to (where someone could swap the socket), is refused outright.

A socket whose connect() is refused was left by a crawl that was killed: it is stale
and unlinked. A live one is never taken over: a second crawl with that name fails.
"""
from __future__ import annotations

import errno
import os
import re
import socket
import stat
from pathlib import Path

from ..errors import RuntimeDirError, UsageError

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
SUN_PATH_MAX = 107  # sockaddr_un.sun_path minus the NUL


def run_dir(*, create: bool = True) -> Path:
    """The per-user directory of control sockets, checked (and made) private."""
    override = os.environ.get("CRAWLTOP_RUN_DIR")
    if override:
        path = Path(override)
    elif os.environ.get("XDG_RUNTIME_DIR") and os.path.isdir(os.environ["XDG_RUNTIME_DIR"]):
        path = Path(os.environ["XDG_RUNTIME_DIR"]) / "crawltop"  # (a stale one after su is skipped)
    else:
        path = Path.home() / ".local" / "state" / "crawltop" / "run"
    if create and not path.exists():
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(path, 0o700)  # mkdir's mode is masked by the umask
    if path.exists():
        check_dir(path)
    return path


def state_dir() -> Path:
    """Where detached crawls keep their logs: `$XDG_STATE_HOME/crawltop`, else ~/.local/state/crawltop."""
    base = os.environ.get("XDG_STATE_HOME")
    path = (Path(base) if base else Path.home() / ".local" / "state") / "crawltop"
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


def check_dir(path: Path) -> None:
    st = os.stat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise RuntimeDirError(f"{path} is not a directory")
    if st.st_uid != os.getuid():
        raise RuntimeDirError(f"{path} belongs to uid {st.st_uid}, not to you (uid {os.getuid()}): refused")
    if st.st_mode & 0o022:
        raise RuntimeDirError(
            f"{path} is writable by others (mode {stat.S_IMODE(st.st_mode):o}): refused; run chmod 700 {path}")


def check_socket(path: Path) -> None:
    """Refuse a socket we would not trust: not ours, or in a directory others can write."""
    check_dir(path.parent)
    st = os.lstat(path)
    if not stat.S_ISSOCK(st.st_mode):
        raise RuntimeDirError(f"{path} is not a socket")
    if st.st_uid != os.getuid():
        raise RuntimeDirError(f"{path} belongs to uid {st.st_uid}, not to you: refused")


def check_name(name: str) -> str:
    if not NAME.fullmatch(name):
        raise UsageError(f"bad crawl name {name!r}: use 1-64 of A-Z a-z 0-9 . _ - (not starting with . _ -)")
    return name


def default_base(host: str | None) -> str:
    """A short name from the root's host: `www.example.com:8080` -> `example.com`."""
    host = (host or "crawl").split("@")[-1].split(":")[0].lower()
    if host.startswith("www."):
        host = host[4:]
    base = re.sub(r"[^a-z0-9.-]+", "-", host).strip(".-")[:40] or "crawl"
    return base if base[0].isalnum() else "c" + base


def is_live(path: Path) -> bool:
    """True if a process accepts connections on this socket; a refused connect means stale."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(2.0)
    try:
        s.connect(str(path))
        return True
    except (ConnectionRefusedError, FileNotFoundError):
        return False
    except OSError as exc:
        if exc.errno in (errno.ECONNREFUSED, errno.ENOENT):
            return False
        return True  # e.g. a full backlog: someone is there
    finally:
        s.close()


def clean_stale(path: Path) -> bool:
    """Unlink a socket nobody listens on (left by a killed crawl); True if it was stale."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    if not stat.S_ISSOCK(st.st_mode) or st.st_uid != os.getuid() or is_live(path):
        return False
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    return True


def live_sockets(removed: list[Path] | None = None) -> list[Path]:
    """The sockets in the run directory, stale ones cleaned up on the way (and appended
    to `removed`, so `ls` can say what it removed)."""
    d = run_dir(create=False)
    if not d.exists():
        return []
    out = []
    for p in sorted(d.iterdir()):
        if p.name.startswith(".") or not NAME.fullmatch(p.name):
            continue
        try:
            if not stat.S_ISSOCK(os.lstat(p).st_mode):
                continue
        except FileNotFoundError:
            continue
        if not clean_stale(p):
            out.append(p)
        elif removed is not None:
            removed.append(p)
    return out


def _bind(path: Path) -> socket.socket | None:
    """Bind and listen, or None if the name is taken by a live crawl."""
    if len(os.fsencode(path)) > SUN_PATH_MAX:
        raise RuntimeDirError(f"socket path too long for a Unix socket: {path}")
    clean_stale(path)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)  # born 0600: no window where others could connect
    try:
        s.bind(str(path))
    except OSError as exc:
        s.close()
        if exc.errno == errno.EADDRINUSE:
            return None
        raise
    finally:
        os.umask(old)
    os.chmod(path, 0o600)
    s.listen(128)
    s.setblocking(False)
    return s


def claim(name: str | None, host: str | None) -> tuple[str, Path, socket.socket]:
    """Bind the crawl's socket: `name` exactly (taken -> UsageError, exit 2), or a free
    one made from the root's host (`example.com`, `example.com-2`, ...)."""
    d = run_dir()
    if name is not None:
        check_name(name)
        sock = _bind(d / name)
        if sock is None:
            raise UsageError(f"a crawl named {name!r} is already running ({d / name}); pick another --name")
        return name, d / name, sock
    base = default_base(host)
    for i in range(1, 1000):
        candidate = base if i == 1 else f"{base}-{i}"
        sock = _bind(d / candidate)
        if sock is not None:
            return candidate, d / candidate, sock
    raise UsageError(f"no free crawl name from {base!r}: use --name")


def resolve(name: str | None) -> Path:
    """The socket of a live crawl by name, or the only one when no name is given."""
    d = run_dir(create=False)
    if name is not None:
        check_name(name)
        path = d / name
        if not path.exists():
            raise UsageError(f"no crawl named {name!r} (crawltop ls lists them)")
        check_socket(path)
        if clean_stale(path):
            raise UsageError(f"no crawl named {name!r}: its socket was stale (the crawl was killed) and is now removed")
        return path
    live = live_sockets()
    if not live:
        raise UsageError("no crawl is running (crawltop ls lists them)")
    if len(live) > 1:
        raise UsageError(f"{len(live)} crawls are running ({', '.join(p.name for p in live)}): name one")
    check_socket(live[0])
    return live[0]
