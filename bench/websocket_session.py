"""A visitor's session spoken over Streamlit's own websocket, without a browser: the server does for it all it does
for a browser tab (the script runs, the fragment polls on the tab's own timer, every message built, serialised and
sent), and the client costs a few milliseconds, so 30 students fit beside the server on 2 cores.

It does what Streamlit's frontend (1.67) does with the messages the benchmark needs: it opens a page with a query
string; follows the page (`new_session`) and the query string (`page_info_changed`) the server sets; runs each
fragment's `run_every` timer (`auto_rerun`), dropped when a full run starts or the server stops it, as the frontend's
setInterval; and presses a button by its key. It sends no widget values it did not change (the server keeps the
others). What it leaves out: drawing (on a student's own device), the forward-message cache (every message is
sent whole), heartbeats.

    async with Session(base, "class", "join=K7QX2M&seat=abc") as student:
        await student.wait_for(lambda run: "step 2 of 5" in run.text)
"""
import asyncio
import contextlib
import re
import time
from dataclasses import dataclass, field

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

FULL, FRAGMENT = ForwardMsg.FINISHED_SUCCESSFULLY, ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY


@dataclass
class Run:
    """One script run the session received: when it ended (perf_counter), whole or a fragment, what it wrote."""
    ended: float = 0.0
    full: bool = True
    texts: list[str] = field(default_factory=list)
    buttons: dict[str, str] = field(default_factory=dict)      # a button's key -> its widget id
    exceptions: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "\n".join(self.texts)


class Session:
    def __init__(self, base: str, page: str = "", query: str = ""):
        self.url = base.replace("http", "ws", 1) + "/_stcore/stream"
        self.page, self.query, self.page_hash = page, query, ""
        self.config = None                          # the server's settings as it sent them (new_session's config)
        self.runs: list[Run] = []                   # every finished run, in order
        self._run = Run()
        self._timers: dict[str, asyncio.Task] = {}
        self._changed = asyncio.Condition()
        self.endings: list[tuple[float, str]] = []  # (perf_counter, how) of every run that ended, for a diagnosis

    async def __aenter__(self) -> "Session":
        import websockets

        self._socket = await websockets.connect(self.url, subprotocols=["streamlit"], max_size=None,
                                                compression=None, open_timeout=60, ping_interval=None)
        self._reader = asyncio.create_task(self._read())
        await self.rerun()
        return self

    async def __aexit__(self, *exc) -> None:
        for task in [*self._timers.values(), self._reader]:
            task.cancel()
        await self._socket.close()

    async def rerun(self, fragment_id: str = "", trigger: str = "") -> None:
        """Ask for a run, as the frontend does: of the page, of one fragment (its timer), or pressing a button."""
        message = BackMsg()
        state = message.rerun_script
        state.query_string, state.page_script_hash = self.query, self.page_hash
        state.page_name = "" if self.page_hash else self.page
        if fragment_id:
            state.fragment_id, state.is_auto_rerun = fragment_id, True
        if trigger:
            widget = state.widget_states.widgets.add()
            widget.id, widget.trigger_value = trigger, True
        await self._socket.send(message.SerializeToString())

    async def click(self, key: str) -> float:
        """Press the button with this key (as the last run drew it); returns when the press was sent."""
        ids = [run.buttons[key] for run in reversed(self.runs) if key in run.buttons]
        if not ids:
            raise LookupError(f"no button {key!r} on the page; the last runs drew {[list(r.buttons) for r in self.runs[-3:]]}")
        await self.rerun(trigger=ids[0])
        return time.perf_counter()

    async def wait_for(self, test, after: float = 0.0, timeout: float = 120) -> Run:
        """The first finished run that ended after `after` (perf_counter) and passes `test`."""
        async with self._changed:
            found = await asyncio.wait_for(self._changed.wait_for(
                lambda: next((r for r in self.runs if r.ended > after and test(r)), None)), timeout)
        return found

    async def shows(self, text: str, after: float, timeout: float = 120) -> float:
        """When the page first showed `text` after `after` (perf_counter) with its page drawn anew by a full run since
        then (a class box's fragment may write its part in a run of its own, at the same moment)."""
        run = await self.wait_for(lambda r: text in r.text and any(
            after < full.ended <= r.ended for full in self.runs if full.full), after, timeout)
        return run.ended

    def last_seen(self) -> str:
        """What the last runs wrote, in short: for a session that fell behind."""
        now = time.perf_counter()
        return "; ".join(f"{'full' if r.full else 'fragment'} run {now - r.ended:.0f} s ago: "
                         f"{' | '.join(t[:60] for t in r.texts[:4])}" for r in self.runs[-3:]) + "; ends: " + \
            ", ".join(f"{how} {now - at:.1f} s ago" for at, how in self.full_runs()[-6:])

    def full_runs(self) -> list[tuple[float, str]]:
        """When each full run started and how it ended (perf_counter, what)."""
        return [(at, how) for at, how in self.endings if how == "started full" or "FRAGMENT" not in how
                and not how.startswith("started")]

    def problems(self) -> list[str]:
        return [e for run in self.runs for e in run.exceptions]

    # --- what the server sends ------------------------------------------------------------------------------------

    async def _read(self) -> None:
        async for data in self._socket:
            message = ForwardMsg.FromString(data)
            kind = message.WhichOneof("type")
            if kind == "new_session":
                self._started(message)
            elif kind == "delta" and message.delta.WhichOneof("type") == "new_element":
                self._element(message.delta.new_element)
            elif kind == "page_info_changed":
                self.query = message.page_info_changed.query_string
            elif kind == "auto_rerun" and message.auto_rerun.fragment_id not in self._timers:
                fragment, every = message.auto_rerun.fragment_id, message.auto_rerun.interval
                self._timers[fragment] = asyncio.create_task(self._poll(fragment, every))
            elif kind == "stop_auto_rerun":
                for fragment in message.stop_auto_rerun.fragment_ids:
                    self._stop(fragment)
            elif kind == "script_finished":
                self.endings.append((time.perf_counter(), ForwardMsg.ScriptFinishedStatus.Name(message.script_finished)))
            if kind == "script_finished" and message.script_finished in (FULL, FRAGMENT):
                self._run.ended, self._run.full = time.perf_counter(), message.script_finished == FULL
                async with self._changed:
                    self.runs.append(self._run)
                    self._changed.notify_all()
                self._run = Run()

    def _started(self, message) -> None:
        self.endings.append((time.perf_counter(), "started " + ("fragment" if message.metadata.run.fragment_ids else "full")))
        self._run = Run()
        if not message.metadata.run.fragment_ids:            # a full run: the frontend drops every timer
            for fragment in list(self._timers):
                self._stop(fragment)
            self.page_hash, self.config = message.new_session.page_script_hash, message.new_session.config

    def _element(self, element) -> None:
        kind = element.WhichOneof("type")
        if kind == "markdown":
            self._run.texts.append(element.markdown.body)
        elif kind == "button":
            key = re.sub(r"^.*?-(?=[^-]*$)", "", element.button.id)         # "$$ID-<hash>-class_next" -> its key
            self._run.buttons[key] = element.button.id
        elif kind == "exception":
            self._run.exceptions.append(f"{element.exception.type}: {element.exception.message}"[:300])

    async def _poll(self, fragment: str, every: float) -> None:
        while True:
            await asyncio.sleep(every)
            with contextlib.suppress(Exception):             # a closing socket ends the poll with the session
                await self.rerun(fragment_id=fragment)

    def _stop(self, fragment: str) -> None:
        task = self._timers.pop(fragment, None)
        if task:
            task.cancel()
