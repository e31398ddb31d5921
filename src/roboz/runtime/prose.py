"""Incremental parsing of a streamed JSON action into prose deltas, field by field.

The LLM's reply is one JSON object (``{"action": "stop", "rationale": "...", "value": "..."}``)
that arrives in arbitrary pieces. A user interface wants the rationale and the text
arguments as prose while they are generated, not JSON text. ``ProseStream.feed`` takes each
piece and returns, per top-level string field, the decoded text that piece completed
(escapes decoded, ``\\u`` pairs joined even when split across pieces). Only the top level is
read; nested values are skipped. A reply that is not JSON simply yields nothing.
"""

from __future__ import annotations

import json
import re
from typing import cast

_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", '"': '"', "\\": "\\", "/": "/"}
_STRING_STOP = re.compile(r'["\\]')
_NESTED_TOKEN = re.compile(r'["\\\[\]{}]')

# States of the top-level scanner.
_START, _KEY, _COLON, _VALUE, _STRING, _NESTED, _SCALAR, _NEXT, _DONE = range(9)


class ProseStream:
    """Feed pieces of a streamed reply; get ``(field, text)`` segments of its string fields."""

    def __init__(self) -> None:
        self.action = ""
        self._state = _START
        self._key: list[str] = []
        self._field = ""
        self._escape = ""  # an escape sequence begun in an earlier piece
        self._high_surrogate = ""
        self._depth = 0
        self._in_nested_string = False
        self._reading_key = False

    def feed(self, piece: str) -> list[tuple[str, str]]:
        if self._state == _START and piece.endswith("}"):
            whole = self._whole_object(piece)
            if whole is not None:
                return whole
        out: list[tuple[str, str]] = []
        text: list[str] = []
        i, n = 0, len(piece)
        while i < n:
            state = self._state
            if state == _STRING:
                i = self._read_string(piece, i, text)
                if self._state != _STRING or i >= n:
                    self._flush(out, text)
                continue
            char = piece[i]
            i += 1
            if state == _START:
                if char == "{":
                    self._state = _KEY
            elif state == _KEY:
                if char == '"':
                    self._key, self._field, self._state = [], "", _STRING
                    self._reading_key = True
                elif char == "}":
                    self._state = _DONE
            elif state == _COLON:
                if char == ":":
                    self._state = _VALUE
            elif state == _VALUE:
                if char == '"':
                    self._reading_key = False
                    self._state = _STRING
                elif char in "[{":
                    self._depth, self._in_nested_string, self._state = 1, False, _NESTED
                elif not char.isspace():
                    self._state = _SCALAR
            elif state == _NESTED:
                i = self._skip_nested(piece, i - 1)
            elif state in (_SCALAR, _NEXT):
                if char == ",":
                    self._state = _KEY
                elif char == "}":
                    self._state = _DONE
            else:  # _DONE: whatever follows (a closing code fence) is not ours
                break
        return out

    def _whole_object(self, piece: str) -> list[tuple[str, str]] | None:
        """The common case of a reply that arrives in one piece, decoded at C speed."""
        try:
            data = json.loads(piece)
        except ValueError:
            return None
        if not isinstance(data, dict):
            return None
        members = cast("dict[str, object]", data)
        fields = [
            (key, value)
            for key, value in members.items()
            if isinstance(value, str) and key != "action" and value
        ]
        try:
            for _key, value in fields:
                value.encode("utf-8")
        except UnicodeEncodeError:
            return None  # a lone surrogate: the incremental path replaces it
        self._state = _DONE
        action = members.get("action")
        self.action = action if isinstance(action, str) else ""
        return fields

    def _flush(self, out: list[tuple[str, str]], text: list[str]) -> None:
        if not text:
            return
        chunk = "".join(text)
        text.clear()
        if self._reading_key:
            self._key.append(chunk)
        elif self._field == "action":
            self.action += chunk
        else:
            out.append((self._field, chunk))

    def _read_string(self, piece: str, i: int, text: list[str]) -> int:
        """Decode string content from ``piece[i:]`` into ``text``; return where it stopped."""
        n = len(piece)
        while i < n:
            if self._escape:
                i = self._continue_escape(piece, i, text)
                continue
            match = _STRING_STOP.search(piece, i)
            end = match.start() if match else n
            if end > i:
                if self._high_surrogate:
                    text.append("\ufffd")  # a high surrogate not followed by its low half
                    self._high_surrogate = ""
                text.append(piece[i:end])
            if match is None:
                return n
            if piece[end] == "\\":
                self._escape = "\\"
                i = end + 1
                continue
            self._end_string(text)
            return end + 1
        return i

    def _continue_escape(self, piece: str, i: int, text: list[str]) -> int:
        self._escape += piece[i]
        i += 1
        sequence = self._escape
        if sequence[1] != "u":
            decoded = _ESCAPES.get(sequence[1], sequence[1])
            self._escape = ""
            self._emit_char(decoded, text)
            return i
        if len(sequence) < 6:
            return i
        self._escape = ""
        try:
            code = int(sequence[2:], 16)
        except ValueError:
            self._emit_char("\ufffd", text)
            return i
        if 0xD800 <= code < 0xDC00:
            if self._high_surrogate:
                text.append("\ufffd")
            self._high_surrogate = chr(code)
        elif 0xDC00 <= code < 0xE000 and self._high_surrogate:
            high = ord(self._high_surrogate) - 0xD800
            self._high_surrogate = ""
            text.append(chr(0x10000 + (high << 10) + (code - 0xDC00)))
        else:
            self._emit_char("\ufffd" if 0xDC00 <= code < 0xE000 else chr(code), text)
        return i

    def _emit_char(self, char: str, text: list[str]) -> None:
        if self._high_surrogate:
            text.append("\ufffd")
            self._high_surrogate = ""
        text.append(char)

    def _end_string(self, text: list[str]) -> None:
        if self._high_surrogate:
            text.append("\ufffd")
            self._high_surrogate = ""
        if self._reading_key:
            self._key.append("".join(text))
            text.clear()
            self._field = "".join(self._key)
            self._reading_key = False
            self._state = _COLON
        else:
            self._state = _NEXT

    def _skip_nested(self, piece: str, i: int) -> int:
        n = len(piece)
        while i < n:
            if self._in_nested_string:
                if self._escape:
                    self._escape = ""
                    i += 1
                    continue
                match = _STRING_STOP.search(piece, i)
                if match is None:
                    return n
                i = match.end()
                if match.group() == "\\":
                    self._escape = "\\"
                else:
                    self._in_nested_string = False
                continue
            match = _NESTED_TOKEN.search(piece, i)
            if match is None:
                return n
            i = match.end()
            token = match.group()
            if token == '"':
                self._in_nested_string = True
            elif token in "[{":
                self._depth += 1
            elif token in "]}":
                self._depth -= 1
                if self._depth == 0:
                    self._state = _NEXT
                    return i
        return i


FIELD_SEPARATOR = "\n\n"


class ProseText:
    """The prose of one reply as a single text, as threads show it: each field's text in
    the order the fields arrive, a blank line between fields."""

    def __init__(self) -> None:
        self.text = ""
        self._field: str | None = None

    def add(self, field: str, chunk: str) -> str:
        """Add one LLMProseDelta; returns the text to append (the chunk, after a separator
        when it starts a new field)."""
        if not chunk:
            return ""
        if field != self._field:
            if self.text:
                chunk = FIELD_SEPARATOR + chunk
            self._field = field
        self.text += chunk
        return chunk


def reply_prose(reply: str) -> str:
    """The prose of a whole reply, exactly as its streamed prose deltas add up in ProseText."""
    prose = ProseText()
    for field, chunk in ProseStream().feed(reply):
        prose.add(field, chunk)
    return prose.text
