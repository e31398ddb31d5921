"""The ``models.json`` catalogue schema; every error names the JSON path it is about.

```json
{"providers": {"my_service": {
    "base_url": "https://models.example.com/v1",
    "api_key_env": "MY_SERVICE_API_KEY",
    "models": {"my_chat_model": {"model_id": "my-chat-model", "endpoint_type": "llm",
                                 "max_context_tokens": 128000, "accepts_images": false,
                                 "input_price_per_mtok": 0.25, "output_price_per_mtok": 2.0}}}}}
```

Prices are optional, per chat model, in currency units per million tokens; a model gives both
or neither.

The catalogue holds routes and the *names* of credential variables, never credential values.
"""

from __future__ import annotations

import json
import keyword
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from roboz.endpoints.specs import ChatModelSpec, ModelPrice, TranscriptionModelSpec

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class CatalogueError(ValueError):
    """models.json is unreadable or invalid; the message names the file and JSON path."""


class ModelEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    model_id: str = Field(min_length=1)
    endpoint_type: Literal["llm", "transcription"]
    max_context_tokens: int | None = Field(default=None, gt=0)
    accepts_images: bool = False
    input_price_per_mtok: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    output_price_per_mtok: float | None = Field(default=None, ge=0, allow_inf_nan=False)

    def price(self) -> ModelPrice | None:
        if self.input_price_per_mtok is None or self.output_price_per_mtok is None:
            return None
        return ModelPrice(self.input_price_per_mtok, self.output_price_per_mtok)


class ProviderEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    base_url: str = Field(min_length=1)
    api_key_env: str | None = None
    models: dict[str, ModelEntry]


class Catalogue(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    providers: dict[str, ProviderEntry]

    def chat_models(self) -> dict[tuple[str, str], ChatModelSpec]:
        return {
            (provider_key, model_key): ChatModelSpec(
                model=model.model_id,
                max_context_tokens=model.max_context_tokens or 0,
                base_url=provider.base_url,
                api_key_env=provider.api_key_env,
                accepts_images=model.accepts_images,
                price=model.price(),
            )
            for provider_key, provider in self.providers.items()
            for model_key, model in provider.models.items()
            if model.endpoint_type == "llm"
        }

    def transcription_models(self) -> dict[tuple[str, str], TranscriptionModelSpec]:
        return {
            (provider_key, model_key): TranscriptionModelSpec(
                model=model.model_id,
                base_url=provider.base_url,
                api_key_env=provider.api_key_env,
            )
            for provider_key, provider in self.providers.items()
            for model_key, model in provider.models.items()
            if model.endpoint_type == "transcription"
        }


def json_path(parts: tuple[str | int, ...]) -> str:
    path = "$"
    for part in parts:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part.isidentifier():
            path += f".{part}"
        else:
            path += f"[{json.dumps(part)}]"
    return path


def is_public_identifier(key: str) -> bool:
    return key.isidentifier() and not keyword.iskeyword(key) and not key.startswith("_")


def parse_catalogue(text: str, *, source: str = "models.json") -> Catalogue:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise CatalogueError(
            f"{source}: not valid JSON (line {error.lineno}, column {error.colno}): {error.msg}"
        ) from None
    try:
        catalogue = Catalogue.model_validate(data)
    except ValidationError as error:
        problems = [
            f"{json_path(tuple(item['loc']))}: {item['msg']}" for item in error.errors()[:5]
        ]
        more = len(error.errors()) - len(problems)
        suffix = f" (and {more} more)" if more > 0 else ""
        raise CatalogueError(f"{source}: {'; '.join(problems)}{suffix}") from None
    problems = _semantic_problems(catalogue)
    if problems:
        raise CatalogueError(f"{source}: {'; '.join(problems)}")
    return catalogue


def load_catalogue(path: Path) -> Catalogue:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CatalogueError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as error:
        raise CatalogueError(f"{path}: cannot read: {error}") from None
    return parse_catalogue(text, source=str(path))


def _semantic_problems(catalogue: Catalogue) -> list[str]:
    problems: list[str] = []
    if not catalogue.providers:
        problems.append("$.providers: declare at least one provider")
    for provider_key, provider in catalogue.providers.items():
        at = ("providers", provider_key)
        if not is_public_identifier(provider_key):
            problems.append(f"{json_path(at)}: the key must be a public Python identifier")
        if not provider.base_url.startswith(("http://", "https://")):
            problems.append(f"{json_path((*at, 'base_url'))}: must be an http(s) URL")
        if provider.api_key_env is not None and not _ENV_NAME.match(provider.api_key_env):
            problems.append(
                f"{json_path((*at, 'api_key_env'))}: must be an environment variable name"
            )
        for model_key, model in provider.models.items():
            model_at = (*at, "models", model_key)
            if not is_public_identifier(model_key):
                problems.append(
                    f"{json_path(model_at)}: the key must be a public Python identifier"
                )
            if model.endpoint_type == "llm" and model.max_context_tokens is None:
                problems.append(
                    f"{json_path((*model_at, 'max_context_tokens'))}: required for llm models"
                )
            prices = (model.input_price_per_mtok, model.output_price_per_mtok)
            if (prices[0] is None) != (prices[1] is None):
                given, missing = (
                    ("input_price_per_mtok", "output_price_per_mtok")
                    if prices[1] is None
                    else ("output_price_per_mtok", "input_price_per_mtok")
                )
                problems.append(
                    f"{json_path((*model_at, missing))}: required with {given} (a cost needs both)"
                )
            if model.endpoint_type == "transcription":
                for name in ("input_price_per_mtok", "output_price_per_mtok"):
                    if getattr(model, name) is not None:
                        problems.append(
                            f"{json_path((*model_at, name))}: not accepted for transcription "
                            "models (they are not priced per token)"
                        )
                if model.max_context_tokens is not None:
                    problems.append(
                        f"{json_path((*model_at, 'max_context_tokens'))}: "
                        "not accepted for transcription models"
                    )
                if model.accepts_images:
                    problems.append(
                        f"{json_path((*model_at, 'accepts_images'))}: "
                        "not accepted for transcription models"
                    )
    return problems
