"""The transcription endpoint contract: audio in, text out."""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Transcription:
    text: str
    model: str = ""


class TranscriptionEndpoint(ABC):
    """Base class of speech-to-text endpoints; like chat endpoints, they are instances."""

    def __init__(self, *, model_name: str, name: str | None = None) -> None:
        self.model_name = model_name
        self.name = name or model_name

    @abstractmethod
    def transcribe(
        self,
        audio: bytes | Path,
        *,
        filename: str | None = None,
        language: str | None = None,
        prompt: str | None = None,
        cancel: threading.Event | None = None,
    ) -> Transcription:
        """Transcribe audio bytes or an audio file."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model_name={self.model_name!r})"
