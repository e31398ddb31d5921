"""The helper's log cannot be forged: whatever a client sends, one request is one log line of
escaped `key=value` fields, with no control character a terminal or the journal would act on.

The attacks go to the real daemon; the log is read back from its stderr.
"""

from __future__ import annotations

import logging
import sys
import unicodedata
import uuid

import msgspec
import pytest
from roboz_helper import log_format, protocol
from roboz_helper.log_format import OneLineFormatter, fields, quote
from roboz_helper.protocol import ProtocolError

from roboz.shed.safe_scripts import SafeScriptsClient

from .conftest import HelperDaemon
from .wire import greeted, read_until_eof

# CR and LF to start a line of one's own, CSI (colour, clear screen), OSC (set the terminal's
# title, terminated by BEL and by ST), a C1 CSI, a tab, DEL, Unicode line and paragraph
# separators and a right-to-left override that reorders what the reader sees.
HOSTILE = (
    "a\rb\nc\x1b[31mred\x1b[2J\x1b]0;owned\x07\x1b]8;;http://x\x1b\\link\x9b1m\t\x7f"
    "\u2028\u2029\u202eevil\x85"
)
FORGED = "\n2026-12-01 08:00:00,000 INFO roboz_helper: run uid=0 profile=test status=success"


def _unprintable(text: str) -> list[str]:
    return sorted({c for c in text if c not in " \n" and not c.isprintable()})


# --- the formatting rules -------------------------------------------------------------------


def test_plain_tokens_stay_bare_and_everything_else_is_quoted() -> None:
    assert (
        fields(uid=0, profile="test", path="/a/b.sh", gone=None)
        == "uid=0 profile=test path=/a/b.sh"
    )
    assert quote("") == '""'
    assert quote("a b") == '"a b"'
    # A quote or backslash in a value cannot end the value early and start a forged field.
    assert quote('x" status=success') == '"x\\" status=success"'
    assert quote("back\\slash") == '"back\\\\slash"'


@pytest.mark.parametrize("char", [chr(c) for c in range(0x20)] + ["\x7f"] + [chr(c) for c in range(0x80, 0xA0)] + ["\u2028", "\u2029", "\u202e", "\u200b", "\ufeff", "\udcff"])  # fmt: skip
def test_every_control_character_is_escaped(char: str) -> None:
    quoted = quote(f"x{char}y")
    assert _unprintable(quoted) == []
    assert "\n" not in quoted
    assert quoted.startswith('"x\\') and quoted.endswith('y"')


def test_escapes_are_unambiguous() -> None:
    # The escaped text of a value containing a literal backslash-x differs from an escaped ESC.
    assert quote("\x1b") == '"\\x1b"'
    assert quote("\\x1b") == '"\\\\x1b"'
    assert quote("é 中") == '"é 中"'  # printable text is kept as it is


def test_long_values_are_cut() -> None:
    assert len(quote("x" * 10_000)) <= log_format.MAX_VALUE_CHARS + 5


def test_a_record_is_one_line_even_with_a_traceback() -> None:
    formatter = OneLineFormatter(journal=False)
    try:
        raise ValueError(f"bad {HOSTILE}")
    except ValueError:
        record = logging.LogRecord(
            "roboz_helper", logging.ERROR, __file__, 1, "oops %s", (HOSTILE,), sys.exc_info()
        )
    line = formatter.format(record)
    assert "\n" not in line and _unprintable(line) == []
    assert "Traceback (most recent call last):\\n" in line
    assert "ValueError: bad a\\rb\\nc\\x1b[31m" in line


def test_under_the_journal_lines_carry_a_syslog_priority() -> None:
    record = logging.LogRecord("roboz_helper", logging.ERROR, __file__, 1, "x", (), None)
    assert OneLineFormatter(journal=True).format(record) == "<3>roboz_helper: x"


# --- attacks on the real daemon -------------------------------------------------------------


def _send_raw(helper: HelperDaemon, body: bytes) -> list[protocol.Response]:
    sock = greeted(helper.socket_path)
    try:
        sock.sendall(protocol.HEADER.pack(len(body)) + body)
        return read_until_eof(sock)
    finally:
        sock.close()


def _lines_with(helper: HelperDaemon, marker: str) -> list[str]:
    assert helper.log_path is not None
    text = helper.log_path.read_bytes().decode("utf-8")  # strict: nothing undecodable either
    return [line for line in text.split("\n") if marker in line]


@pytest.mark.root
def test_hostile_strings_in_every_field_cannot_forge_log_lines(helper: HelperDaemon) -> None:
    client = SafeScriptsClient(helper.socket_path)
    markers = {name: f"m{uuid.uuid4().hex}" for name in ("path", "arg", "exec_arg", "command", "nul", "field", "tag")}  # fmt: skip

    def hostile(name: str) -> str:
        return f"{markers[name]}{HOSTILE}{FORGED} {markers[name]}"

    assert client.run_script(hostile("path") + ".sh").status == "refused"
    result = client.run_script("hello.sh", [hostile("arg")])
    assert result.status == "success" and result.stdout.startswith(f"hello {markers['arg']}")
    assert client.exec_command(["/bin/echo", hostile("exec_arg")]).status == "success"
    assert client.exec_command(["/bin/" + hostile("command")]).status == "refused"
    assert client.run_script("hello.sh", [hostile("nul") + "\0"]).status == "refused"
    # Protocol errors quote what the client sent: an unknown field, an unknown tag, bad UTF-8.
    unknown_field = msgspec.msgpack.encode({"type": "list_scripts", hostile("field"): 1})
    unknown_tag = msgspec.msgpack.encode({"type": hostile("tag")})
    bad_utf8 = msgspec.msgpack.encode({"type": "run_script", "path": "PLACEHOLDER"}).replace(
        b"\xabPLACEHOLDER", b"\xab" + b"123456789\xff\x1b"
    )
    for body in (unknown_field, unknown_tag, bad_utf8):
        (reply,) = _send_raw(helper, body)
        assert isinstance(reply, ProtocolError), reply

    for name in ("path", "arg", "exec_arg", "command", "nul", "field", "tag"):
        lines = _lines_with(helper, markers[name])
        # One line, holding both copies of the marker: the forged text stayed inside it.
        assert len(lines) == 1, (name, lines)
        (line,) = lines
        assert line.count(markers[name]) >= 2, (name, line)
        assert _unprintable(line) == [], (name, line)
        assert "\\x1b]0;owned\\x07" in line and "\\r" in line and "\\n2026" in line, line
    # Nothing anywhere in the log that a terminal would act on, and no line the client wrote.
    assert helper.log_path is not None
    log = helper.log_path.read_text()
    assert _unprintable(log) == []
    assert not any(line.startswith("2026-12-01 08:00:00,000") for line in log.splitlines())
    assert not any(unicodedata.category(c) in ("Zl", "Zp") for c in log)


@pytest.mark.root
def test_a_run_line_has_its_fields(helper: HelperDaemon) -> None:
    marker = uuid.uuid4().hex
    result = SafeScriptsClient(helper.socket_path).run_script("fail.sh", ["3", marker])
    assert isinstance(result.exit_code, int) and result.exit_code == 3
    (line,) = _lines_with(helper, marker)
    assert " roboz_helper: run uid=0 " in line
    assert "profile=test run=" in line
    assert f'kind=script argv="fail.sh 3 {marker}" status=failed exit=3 ' in line
    assert " duration=" in line
