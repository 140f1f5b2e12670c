"""A real headless Chromium (Debian's package) driven over the DevTools protocol.

textual-serve draws the terminal with xterm.js on a canvas, so the page's DOM holds no
text. A script injected before the page's own finds xterm's Terminal object as the page
builds it, and reads its screen buffer: the characters the page shows, line by line.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run", "--disable-dev-shm-usage",
         "--window-size=1400,900", "--remote-debugging-port=0"]

# The page's terminal object sets `this.fitAddon` in its constructor: catch `this` there.
HOOK = """
Object.defineProperty(Object.prototype, "fitAddon", {configurable: true, set(v) {
  Object.defineProperty(this, "fitAddon", {value: v, writable: true, configurable: true, enumerable: true});
  window.__crawltopTerminal = this;
}});
"""
SCREEN = """(() => {
  const o = window.__crawltopTerminal;
  if (!o || !o.terminal) return null;
  const t = o.terminal, b = t.buffer.active, out = [];
  for (let y = 0; y < t.rows; y++) { const l = b.getLine(y); out.push(l ? l.translateToString(true) : ""); }
  return out.join("\\n");
})()"""


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


class Page:
    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self._id = 0

    async def send(self, method: str, **params: object) -> dict:
        self._id += 1
        await self.ws.send_json({"id": self._id, "method": method, "params": params})
        while True:
            msg = json.loads((await self.ws.receive()).data)
            if msg.get("id") == self._id:
                if "error" in msg:
                    raise RuntimeError(msg["error"])
                return msg.get("result", {})

    async def screen(self) -> str:
        result = await self.send("Runtime.evaluate", expression=SCREEN, returnByValue=True)
        return result.get("result", {}).get("value") or ""


@contextlib.asynccontextmanager
async def open_page(url: str) -> AsyncIterator[Page]:
    exe = chromium()
    assert exe, "chromium is not installed"
    profile = Path(tempfile.mkdtemp(prefix="chromium-"))
    proc = subprocess.Popen([exe, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not port_file.exists() or not port_file.read_text().strip():
            assert time.monotonic() < deadline, "chromium did not start"
            await asyncio.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{port}/json/list") as resp:
                targets = [t for t in await resp.json() if t["type"] == "page"]
            async with http.ws_connect(targets[0]["webSocketDebuggerUrl"], max_msg_size=0) as ws:
                page = Page(ws)
                await page.send("Page.enable")
                await page.send("Page.addScriptToEvaluateOnNewDocument", source=HOOK)
                await page.send("Page.navigate", url=url)
                yield page
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(profile, ignore_errors=True)
