"""The dashboard's questions: stop this crawl? and the new-crawl prompt (tui/top/launch.py)."""
from __future__ import annotations

from collections.abc import Awaitable, Callable

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from .. import fmt


class ConfirmStop(ModalScreen[bool]):
    """'Stop crawl NAME?' y / n."""

    BINDINGS = [
        Binding("y", "answer(True)", "Stop it", id="stop-yes", priority=True),
        Binding("n,escape", "answer(False)", "Keep it", id="stop-no", priority=True),
    ]

    def __init__(self, name: str, queued: int) -> None:
        super().__init__(id="confirm-stop")
        self.crawl_name = name
        self.queued = queued

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(Content(f"Stop the crawl {self.crawl_name}?"), classes="dialog-title")
            yield Static(Content(f"In-flight fetches are cancelled and put back, the {fmt.count(self.queued)} "
                                 "queued URLs are not fetched (a state file or Redis keeps them), "
                                 "and every record is flushed."), classes="dialog-body")
            yield Static(Content("y: stop it · n or escape: keep it running"), classes="dialog-help")

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)


Start = Callable[[str, str], Awaitable[str | None]]


class NewCrawlPrompt(ModalScreen[str | None]):
    """A URL and options as on the command line, and a hidden field for --header and
    --proxy (what is typed there is never shown). `start(line, secret)` returns None when
    the crawl started, else the reason, shown under the fields."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="new-cancel")]

    def __init__(self, start: Start, cwd: str) -> None:
        super().__init__(id="new-crawl")
        self.start = start
        self.cwd = cwd
        self.busy = False

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(Content("Start a crawl (detached): a URL and options, as after `crawltop crawl`"),
                         classes="dialog-title")
            yield Input(placeholder="https://example.com/ -c 8 -o out.jsonl", id="new-line")
            yield Static(Content("--header / --proxy (hidden, never shown or kept):"), classes="dialog-help")
            yield Input(password=True, placeholder='--header "Authorization: Bearer …"', id="new-secret")
            yield Static(Content(""), id="new-error", classes="prompt-error")
            yield Static(Content(f"paths are relative to {self.cwd} · enter starts · escape cancels"),
                         classes="dialog-help")

    def on_mount(self) -> None:
        for inp in self.query(Input):
            inp.cursor_blink = False
        self.query_one("#new-line", Input).focus()

    def _say(self, text: str, style: str = "$error") -> None:
        self.query_one("#new-error", Static).update(Content.styled(text, style))

    @on(Input.Submitted)
    async def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if self.busy:
            return
        line = self.query_one("#new-line", Input).value.strip()
        secret_input = self.query_one("#new-secret", Input)
        if not line:
            self.dismiss(None)
            return
        self.busy = True
        self._say("starting…", "$text-muted")
        try:
            refusal = await self.start(line, secret_input.value)
        finally:
            self.busy = False
        if refusal:
            self._say(refusal)
            return
        secret_input.value = ""
        self.dismiss(line)

    def action_cancel(self) -> None:
        self.query_one("#new-secret", Input).value = ""
        self.dismiss(None)
