"""The dashboard's questions: stop this crawl? dismiss the ended ones? and the new-crawl prompt
(tui/top/launch.py)."""
from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Checkbox, Input, Static

from ...core.monitor.sanitize import clean
from .. import fmt
from ..panels.keybar import KeyBar


def answers(name: str, yes: str, no: str) -> list[BindingType]:
    """A question's keys: y does it, n or escape leaves it be (ids `NAME-yes`, `NAME-no`)."""
    return [Binding("y", "answer", yes, id=f"{name}-yes", priority=True),
            Binding("n,escape", "cancel", no, id=f"{name}-no", priority=True)]


class Confirm(ModalScreen[bool]):
    """A yes / no question about crawls. Its key bar is its help, as every dialog's
    (tui/screens/dialogs.py ConfirmQuit)."""

    BINDINGS = answers("question", "Yes", "No")

    def __init__(self, title: str, body: str, hint: str, *, id: str) -> None:
        super().__init__(id=id)
        self.texts = (title, body, hint)

    def compose(self) -> ComposeResult:
        title, body, hint = self.texts
        with Vertical(classes="dialog"):
            yield Static(Content(title), classes="dialog-title")
            yield Static(Content(body), classes="dialog-body")
            yield Static(Content(hint), classes="dialog-help")
        yield KeyBar()

    def action_answer(self) -> None:
        self.dismiss(True)

    def action_cancel(self) -> None:
        self.dismiss(False)


class ConfirmStop(Confirm):
    """'Stop crawl NAME?' y / n."""

    BINDINGS = answers("stop", "Stop it", "Keep it")

    def __init__(self, name: str, queued: int) -> None:
        super().__init__(f"Stop the crawl {name}?",
                         f"In-flight fetches are cancelled and put back, the {fmt.count(queued)} queued URLs "
                         "are not fetched (a state file or Redis keeps them), and every record is flushed.",
                         "y: stop it · n or escape: keep it running", id="confirm-stop")
        self.crawl_name = name
        self.queued = queued


class ConfirmDismiss(Confirm):
    """'Dismiss these N ended crawls?' y / n: the names are those that will go."""

    BINDINGS = answers("dismiss", "Dismiss them", "Keep them")

    def __init__(self, names: Sequence[str]) -> None:
        n = len(names)
        super().__init__(f"Dismiss {n} ended crawl{'s' if n != 1 else ''}?",
                         f"{clean(', '.join(names), 400)}: gone from the list, for every dashboard (their "
                         "summaries are removed from the run directory; a shared crawl's row only here).",
                         "y: dismiss them · n or escape: keep them", id="confirm-dismiss")
        self.names = tuple(names)


Start = Callable[[str, str], Awaitable[str | None]]


class BrowserSwitch(Checkbox, inherit_bindings=False):
    """The form's --browser switch: space turns it on or off, and enter starts the crawl
    from here too (the key bar says so), as from either field."""

    BINDINGS = [Binding("space", "toggle_button", "Switch", show=False)]


class NewCrawlPrompt(ModalScreen[str | None]):
    """A URL and options as on the command line, a switch for --browser (a site whose pages
    scripts build; it only adds --browser to the line, so typing it does the same), and a
    hidden field for --header and --proxy (what is typed there is never shown).
    `start(line, secret)` returns None when the crawl started, else the reason, shown under
    the fields (no Playwright or no Chromium: the line `crawl --browser` would say)."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="new-cancel"),
                Binding("enter", "submit", "Start", show=False)]  # (a field's own enter comes first)

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
            yield BrowserSwitch("load its pages in Chromium, for sites scripts build (--browser)", id="new-browser")
            yield Static(Content("--header / --proxy (hidden, never shown or kept):"), classes="dialog-help")
            yield Input(password=True, placeholder='--header "Authorization: Bearer …"', id="new-secret")
            yield Static(Content(""), id="new-error", classes="prompt-error")
            yield Static(Content(f"paths are relative to {self.cwd} · enter starts · escape cancels"),
                         classes="dialog-help")
        yield KeyBar(hints=[("⏎", "Start"), ("tab", "Next field"), ("space", "Switch")])

    def on_mount(self) -> None:
        for inp in self.query(Input):
            inp.cursor_blink = False
        self.query_one("#new-line", Input).focus()

    def _say(self, text: str, style: str = "$error") -> None:
        self.query_one("#new-error", Static).update(Content.styled(text, style))

    @on(Input.Submitted)
    async def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        await self.action_submit()

    async def action_submit(self) -> None:
        if self.busy:
            return
        line = self.query_one("#new-line", Input).value.strip()
        secret_input = self.query_one("#new-secret", Input)
        if not line:
            self.dismiss(None)
            return
        if self.query_one("#new-browser", Checkbox).value and "--browser" not in line.split():
            line += " --browser"
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
