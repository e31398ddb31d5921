"""Maintenance cadence: the Librarian's last default tool, between one sweep and the next.

After a sweep that began with no watched run active, the Librarian stops (that sweep was the
final one). Otherwise it sleeps ``interval_s``, waking early when a watched run in this
process ends or the Librarian is cancelled; then it runs one more sweep inline (a cancelled
Librarian gets no further step) and stops once no watched run is active. A sleep that simply
ran out hands over to the next loop's sweep. (A watched run that ends in this process also
gets its final sweep from the Librarian's listener, in the ending run's thread: see
``Maintenance._on_event``.)
"""

from __future__ import annotations

import time

from roboz.models import Empty, Message, Stop
from roboz.shed.tools.maintenance import Maintenance, cancelled
from roboz.tools import Tool

DEFAULT_NAME = "maintenance_cadence"
_SLICE_S = 0.05


class Cadence:
    def __init__(
        self, maintenance: Maintenance, *, interval_s: float = 60.0, name: str = DEFAULT_NAME
    ) -> None:
        if interval_s <= 0:
            raise ValueError(f"interval_s must be positive, got {interval_s}")
        self.maintenance = maintenance
        self.interval_s = interval_s
        self.name = name

    def tool(self) -> Tool:
        return Tool(
            name=self.name,
            instruction="Sleep until the next sweep; stop once the watched agents are done.",
            input_type=Empty,
            output_types=(Empty, Stop),
            func=self._run,
            records_own_output=True,
        )

    def _active(self) -> bool:
        return any(map(self.maintenance.is_running, self.maintenance.runs()))

    def _run(self, input: Empty, messages: list[Message]) -> Empty | Stop:
        maintenance = self.maintenance
        if maintenance.began_inactive:
            return Stop(value="the watched agents are inactive; the final sweep ran")
        deadline = time.monotonic() + self.interval_s
        woken = False
        while not woken and time.monotonic() < deadline:
            woken = maintenance.wake.wait(min(_SLICE_S, max(0.0, deadline - time.monotonic())))
            woken = woken or cancelled()
        if not woken:
            return Empty()
        maintenance.wake.clear()
        maintenance.run_step(maintenance.sweep, messages)
        if maintenance.began_inactive or cancelled():
            return Stop(value="the watched agents are inactive; the final sweep ran")
        return Empty()
