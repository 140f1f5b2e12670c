"""Queue depth, throughput and errors over the last two minutes."""
from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widget import Widget

from ...core.monitor.stats import HISTORY_SECONDS, Snapshot
from .. import fmt
from ..widgets.line import Line
from .breakdown import status_parts

BARS = " ▁▂▃▄▅▆▇█"


def buckets(data: Sequence[float], width: int, how: str = "mean") -> list[float]:
    """Fit per-second `data` (oldest first) into at most `width` columns, newest right.

    While the history fits, one column is one second (so the graph grows from the
    right as the crawl starts); beyond that the last two minutes are bucketed into
    `width` columns, by mean (throughput, queue) or max (errors: a spike must show).
    """
    if width <= 0:
        return []
    values = [float(v) for v in data[-HISTORY_SECONDS:]]
    n = len(values)
    if n <= width:
        return values
    out = []
    for i in range(width):
        lo, hi = i * n // width, (i + 1) * n // width
        part = values[lo:hi] or [0.0]
        out.append(max(part) if how == "max" else sum(part) / len(part))
    return out


def bars(values: Sequence[float], height: int) -> list[str]:
    """Block-character bars scaled from zero to the maximum, `height` lines tall."""
    top = max(values, default=0.0)
    levels = height * 8
    cols = [round(v / top * levels) if top > 0 else 0 for v in values]
    lines = []
    for row in range(height - 1, -1, -1):  # top line first
        base = row * 8
        lines.append("".join(BARS[min(8, max(0, c - base))] for c in cols))
    return lines


class Spark(Widget):
    """A sparkline drawn from zero, one column per bucket of seconds."""

    COMPONENT_CLASSES = {"spark--bar"}

    def __init__(self, how: str = "mean", *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.how = how
        self._data: tuple[int, ...] = ()

    def set_data(self, data: tuple[int, ...]) -> None:
        if data != self._data:
            self._data = data
            self.refresh()

    def render(self) -> Text:
        width, height = self.content_size
        if width <= 0 or height <= 0:
            return Text("")
        values = buckets(self._data, width, self.how)
        lines = bars(values, height)
        pad = width - len(values)
        style = self.get_component_rich_style("spark--bar", partial=True)
        text = "\n".join(" " * pad + line for line in lines)
        return Text(text, style=style, no_wrap=True, end="")


class SparkRow(Horizontal):
    """label | sparkline | current figure."""

    def __init__(self, label: str, how: str = "mean", *, id: str | None = None) -> None:
        super().__init__(id=id, classes="spark-row")
        self._label = label
        self.spark = Spark(how, classes="spark")
        self.figure = Line(classes="spark-figure")

    def compose(self) -> ComposeResult:
        label = Line(classes="spark-label")
        label.show(self._label)
        yield label
        yield self.spark
        yield self.figure


class SparkPanel(Vertical):
    """Three sparklines (queue depth, pages/s, errors/s) and the status-code counts."""

    def compose(self) -> ComposeResult:
        self.queue = SparkRow("queue", "mean", id="spark-queue")
        self.pages = SparkRow("pages/s", "mean", id="spark-pages")
        self.errors = SparkRow("errors/s", "max", id="spark-errors")
        yield self.queue
        yield self.pages
        yield self.errors
        with Horizontal(classes="status-row"):
            label = Line(classes="status-label")
            label.show("status")
            yield label
            self.statuses = Line(id="statuses")
            yield self.statuses

    def show(self, snap: Snapshot) -> None:
        self.queue.spark.set_data(snap.history_queue)
        self.queue.figure.show((fmt.count(snap.queued), "bold"), " queued")
        self.pages.spark.set_data(snap.history_pages)
        self.pages.figure.show((fmt.rate(snap.rate_now), "bold"), " now")
        self.errors.spark.set_data(snap.history_errors)
        recent = snap.history_errors[-5:]
        err_rate = sum(recent) / len(recent) if recent else 0.0
        self.errors.figure.show((fmt.rate(err_rate), "bold $error" if err_rate else "bold"), " err")
        self.statuses.show(*status_parts(snap.statuses))
