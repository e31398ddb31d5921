"""A run that asks its proxy for endless distinct names (a wildcard entry allows them all).

The proxy keeps each name's answer for the run (one lookup for many connections), and kept
every name ever asked for, failures included, until the run ended: a long run asking for
names that do not exist grew the helper by an entry (with its exception) per name, for
every run at once. Failed lookups are now forgotten when they fail, and the answers kept
are bounded (the oldest go first).
"""

from __future__ import annotations

import textwrap

import pytest
from roboz_helper.egress import proxy

from . import netlab
from .netlab import REMOTE, Lab, RunNet

ASK = """
import socket, sys
for name in sys.argv[1:]:
    s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
    s.sendall(f"CONNECT {name}:7 HTTP/1.1\\r\\n\\r\\n".encode())
    s.recv(200)
    s.close()
"""


def _ask(run: RunNet, names: list[str]) -> None:
    result = run.ns.exec(["/usr/bin/python3", "-c", textwrap.dedent(ASK), *names], env=run.env())
    assert result.returncode == 0, result


def _dns_queries(lab: Lab) -> int:
    return sum(1 for server, _ in lab.log.take() if server.startswith("dns"))


def test_failed_lookups_are_not_kept(lab: Lab) -> None:
    names = [f"gone{i}.remote.test" for i in range(200)]
    with lab.run(["*.remote.test"]) as run:
        _ask(run, names)
        kept = len(run.session._resolved)  # the table the bound is about
        report = run.finish()
    assert report.refused == 200 and {r.reason for r in report.refusals} == {"unresolved"}
    assert kept == 0


def test_the_answers_kept_are_bounded(lab: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(proxy, "MAX_RESOLVED", 8)
    names = [f"n{i}.remote.test" for i in range(12)]
    for name in names:
        monkeypatch.setitem(netlab.NAMES, name, [("A", REMOTE)])
    with lab.run(["*.remote.test:7"]) as run:
        lab.log.take()
        _ask(run, names)
        first_round = _dns_queries(lab)
        _ask(run, [names[-1]])  # kept: no lookup
        kept_one = _dns_queries(lab)
        _ask(run, [names[0]])  # the oldest, gone: looked up again
        again = _dns_queries(lab)
        kept = len(run.session._resolved)
        report = run.finish()
    assert report.connections == 14 and report.refusals == ()
    assert first_round == 2 * len(names)  # A and AAAA per name
    assert kept_one == 0 and again == 2
    assert kept <= 8
