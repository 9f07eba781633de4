"""``CacheView``: a live table of kernel-cache events; selecting one shows why it missed."""

from __future__ import annotations

import html
import threading
import time
import weakref

import traitlets

from qnb.viz.assets import widget_module
from qnb.viz.events import event_detail, event_record
from qnb.viz.widget import QnbWidget

SYNC_SECONDS = 0.25


def _weak_listener(view: CacheView):
    """A cache listener that does not keep the view alive, and removes itself once the
    view has been garbage-collected."""
    ref = weakref.ref(view)

    def listener(event):
        target = ref()
        if target is None:
            import qnb.cache

            qnb.cache.remove_listener(listener)
            return
        target._add_event(event)

    return listener


class CacheView(QnbWidget):
    """Every kernel-cache event of this process, newest first, updated live: kernel,
    backend, outcome (miss / disk-hit / memory-hit), time, short key and reason (a miss's,
    or a disk hit's: what changed since the closest key this process had seen).
    Selecting a row (``selected`` = its number) fills ``detail`` with the reason
    component by component and the key's components. ``close()`` stops listening."""

    _esm = widget_module("cache_view.js")

    events = traitlets.List(traitlets.Dict()).tag(sync=True)
    selected = traitlets.Int(-1).tag(sync=True)
    detail = traitlets.Unicode("").tag(sync=True)

    def __init__(self, max_events: int = 500, **kwargs):
        import qnb.cache

        super().__init__(**kwargs)
        self._lock = threading.Lock()
        self._max_events = max_events
        self._rows: list[dict] = []  # what ``events`` shows once synced
        self._raw: dict[int, object] = {}  # row number -> its (latest) CacheEvent
        self._count = 0
        self._last_sync = 0.0
        self._timer: threading.Timer | None = None
        for event in qnb.cache.events()[-max_events:]:
            self._add_event(event, sync=False)
        self._flush()
        self._listener = _weak_listener(self)
        qnb.cache.add_listener(self._listener)

    def _add_event(self, event, sync: bool = True) -> None:
        """A new row, or, for another memory hit of the kernel in the last row, that
        row's ``count`` + 1: a launch loop gives one row, not thousands. Count updates
        are synced at most every SYNC_SECONDS, so a hot loop does not flood the front end."""
        with self._lock:
            last = self._rows[-1] if self._rows else None
            record = event_record(self._count, event)
            if (
                last is not None
                and record["outcome"] == "memory-hit"
                and all(last[k] == record[k] for k in ("outcome", "kernel", "backend", "short_key"))
            ):
                self._rows[-1] = {
                    **last,
                    "count": last["count"] + 1,
                    "time": record["time"],
                    "ms": record["ms"],
                }
                self._raw[last["n"]] = event
                if sync:
                    self._sync_soon()
                return
            self._count += 1
            self._raw[record["n"]] = event
            self._rows.append(record)
            for old in self._rows[: max(0, len(self._rows) - self._max_events)]:
                self._raw.pop(old["n"], None)
            del self._rows[: max(0, len(self._rows) - self._max_events)]
        if sync:
            self._flush()

    def _sync_soon(self) -> None:
        wait = self._last_sync + SYNC_SECONDS - time.monotonic()
        if wait <= 0:
            self._flush_locked()
        elif self._timer is None:
            self._timer = threading.Timer(wait, self._flush)
            self._timer.daemon = True
            self._timer.start()

    def _flush_locked(self) -> None:
        self._timer = None
        self._last_sync = time.monotonic()
        self.events = list(self._rows)

    def _flush(self) -> None:
        """Sync ``events`` with every row and count recorded so far."""
        with self._lock:
            self._flush_locked()

    @traitlets.observe("selected")
    def _on_select(self, change) -> None:
        event = self._raw.get(change["new"])
        self.detail = event_detail(event) if event is not None else ""

    def select(self, number: int) -> str:
        """Select event ``number`` (as in the table's first column); returns its detail."""
        self.selected = number
        return self.detail

    def close(self) -> None:
        timer = getattr(self, "_timer", None)
        if timer is not None:
            timer.cancel()
        listener = getattr(self, "_listener", None)
        if listener is not None:
            import qnb.cache

            qnb.cache.remove_listener(listener)
            self._listener = None
        super().close()

    def __repr__(self) -> str:
        return f"CacheView({len(self.events)} events)"

    def _static_html(self, png: bytes | None) -> str:
        head = (
            "<tr>"
            + "".join(
                f"<th>{h}</th>"
                for h in ("#", "time", "kernel", "backend", "outcome", "ms", "key", "reason")
            )
            + "</tr>"
        )
        rows = []
        for row in reversed(self.events):
            outcome = row["outcome"] + (f" ×{row['count']}" if row.get("count", 1) > 1 else "")
            cells = (
                row["n"],
                row["time"],
                row["kernel"],
                row["backend"],
                outcome,
                row["ms"],
                row["short_key"],
                row["reason"],
            )
            rows.append(  # (the table keeps cells on one line, "memory-hit" too; the reason wraps)
                "<tr>"
                + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells[:-1])
                + f'<td style="white-space:normal">{html.escape(str(cells[-1]))}</td></tr>'
            )
        if not rows:
            rows.append('<tr><td colspan="8"><i>no cache events yet</i></td></tr>')
        detail = (
            f'<pre style="border-left:3px solid #c83c28;padding-left:6px">'
            f"{html.escape(self.detail)}</pre>"
            if self.detail
            else ""
        )
        return (
            f'<div class="qnb-static qnb-cacheview-static"><b>{html.escape(repr(self))}</b>'
            '<table style="border-collapse:collapse;font:12px monospace;white-space:nowrap">'
            f"<thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>{detail}</div>"
        )
