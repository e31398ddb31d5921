"""Image attachments, checked for source and encoding without fetching or decoding pixels."""

from __future__ import annotations

import base64
import binascii
import re
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, field_validator

ImageMediaType = Literal["image/png", "image/jpeg", "image/webp", "image/gif"]

# Magic numbers let us reject bytes that are not what their media type claims, without a
# decoder dependency and without touching pixel data.
_SIGNATURES: dict[str, tuple[bytes, ...]] = {
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/gif": (b"GIF87a", b"GIF89a"),
}
_DATA_URL = re.compile(r"^data:(?P<media>image/[a-z]+);base64,(?P<data>[A-Za-z0-9+/=\s]*)$")


def _matches_signature(data: bytes, media_type: str) -> bool:
    if media_type == "image/webp":
        return len(data) >= 12 and data[:4] == b"RIFF" and data[8:12] == b"WEBP"
    return any(data.startswith(sig) for sig in _SIGNATURES.get(media_type, ()))


class Image(BaseModel):
    """An image given by HTTP(S) URL or by a base64 ``data:image/...`` URL."""

    model_config = ConfigDict(frozen=True)

    url: str
    detail: Literal["auto", "low", "high"] = "auto"

    @field_validator("url")
    @classmethod
    def _check_source(cls, url: str) -> str:
        if url.startswith("data:"):
            match = _DATA_URL.match(url)
            if match is None:
                raise ValueError("image data URLs must look like data:image/<type>;base64,<data>")
            media = match.group("media")
            if media not in _SIGNATURES and media != "image/webp":
                raise ValueError(f"unsupported image media type {media!r}")
            try:
                raw = base64.b64decode(match.group("data"), validate=False)
            except binascii.Error as error:
                raise ValueError(f"image data URL is not valid base64: {error}") from None
            if not _matches_signature(raw, media):
                raise ValueError(f"image data does not look like {media}")
            return url
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError("image URLs must be http(s) URLs or base64 data URLs")
        return url

    @classmethod
    def from_bytes(
        cls,
        data: bytes,
        media_type: ImageMediaType = "image/png",
        detail: Literal["auto", "low", "high"] = "auto",
    ) -> Image:
        """Embed raw PNG, JPEG, WebP or GIF bytes as a data URL."""
        if media_type not in ("image/png", "image/jpeg", "image/webp", "image/gif"):
            raise ValueError(f"unsupported image media type {media_type!r}")
        if not _matches_signature(data, media_type):
            raise ValueError(f"bytes do not look like {media_type}")
        encoded = base64.b64encode(data).decode("ascii")
        return cls(url=f"data:{media_type};base64,{encoded}", detail=detail)

    @property
    def is_embedded(self) -> bool:
        return self.url.startswith("data:")
