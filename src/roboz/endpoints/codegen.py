"""Generate the typed ``providers.py`` module of a catalogue.

The output is explicit (one class per provider, one annotated attribute per model) so editors
and type checkers complete provider and model names without running anything, and it is
already in ruff's format so generated files pass a project's lint unchanged.
"""

from __future__ import annotations

import json
from pathlib import Path

from roboz.endpoints.catalogue import Catalogue, CatalogueError, load_catalogue

GENERATED_MARKER = "# roboz: generated-file (roboz inventory generate)"
_MARKER_SEARCH_LINES = 5


def _literal(value: str) -> str:
    # JSON string syntax is valid Python and uses the double quotes ruff's format prefers.
    return json.dumps(value)


def _class_name(provider_key: str) -> str:
    return "".join(part.capitalize() for part in provider_key.split("_") if part) + "Models"


def render_providers(catalogue: Catalogue, *, source_name: str = "models.json") -> str:
    class_names = {key: _class_name(key) for key in catalogue.providers}
    taken = {*class_names.values(), "LLMEndpoint", "TranscriptionEndpoint"}
    clashes = taken & set(catalogue.providers)
    if len(set(class_names.values())) != len(class_names) or clashes:
        raise CatalogueError(
            f"{source_name}: provider keys {sorted(catalogue.providers)} clash with names in "
            "the generated module; rename a provider"
        )
    has_chat = any(
        model.endpoint_type == "llm"
        for provider in catalogue.providers.values()
        for model in provider.models.values()
    )
    has_transcription = any(
        model.endpoint_type == "transcription"
        for provider in catalogue.providers.values()
        for model in provider.models.values()
    )
    lines = [
        f"# Generated from {source_name} by `roboz inventory generate`. Do not edit: edit the",
        "# JSON and regenerate. Only files carrying the next line are ever replaced.",
        GENERATED_MARKER,
        '"""Typed endpoints of this model catalogue; importing it reads no credentials."""',
        "",
        "from __future__ import annotations",
        "",
        "from roboz.endpoints.adapters import openai_compatible as _openai_compatible",
    ]
    lines.append("from roboz.endpoints.specs import ModelPrice")
    if has_transcription:
        lines.append("from roboz.endpoints.transcription import TranscriptionEndpoint")
    if has_chat:
        lines.append("from roboz.llm.endpoint import LLMEndpoint")
    for provider_key, provider in catalogue.providers.items():
        lines += ["", "", f"class {class_names[provider_key]}:"]
        lines.append(f'    """Models of the {provider_key} provider."""')
        lines += ["", "    def __init__(self) -> None:"]
        if not provider.models:
            lines.append("        pass")
        for model_key, model in provider.models.items():
            if model.endpoint_type == "llm":
                annotation, factory = "LLMEndpoint", "chat_endpoint"
            else:
                annotation, factory = "TranscriptionEndpoint", "transcription_endpoint"
            lines.append(f"        self.{model_key}: {annotation} = _openai_compatible.{factory}(")
            lines.append(f"            model={_literal(model.model_id)},")
            if model.endpoint_type == "llm":
                lines.append(f"            max_context_tokens={model.max_context_tokens},")
            lines.append(f"            base_url={_literal(provider.base_url)},")
            if provider.api_key_env is not None:
                lines.append(f"            api_key_env={_literal(provider.api_key_env)},")
            if model.accepts_images:
                lines.append("            accepts_images=True,")
            if model.endpoint_type == "llm" and (price := model.price()) is not None:
                lines.append(
                    f"            price=ModelPrice({float(price.input_per_mtok)!r}, "
                    f"{float(price.output_per_mtok)!r}),"
                )
            lines.append(f"            name={_literal(f'{provider_key}.{model_key}')},")
            lines.append("        )")
    lines += ["", ""]
    for provider_key in catalogue.providers:
        lines.append(f"{provider_key} = {class_names[provider_key]}()")
    lines += _price_lines(catalogue)
    lines += ["", "__all__ = ["]
    lines += [f"    {_literal(key)}," for key in sorted(catalogue.providers)]
    lines.append("]")
    return "\n".join(lines) + "\n"


def _price_lines(catalogue: Catalogue) -> list[str]:
    """``PRICES``: the catalogue's per-token prices by endpoint name, for usage and cost."""
    entries = [
        (f"{provider_key}.{model_key}", price)
        for provider_key, provider in catalogue.providers.items()
        for model_key, model in provider.models.items()
        if (price := model.price()) is not None
    ]
    lines = ["", "# Per-token prices from the catalogue, by endpoint name (currency units per"]
    lines.append("# million tokens); models without prices are not listed.")
    if not entries:
        return [*lines, "PRICES: dict[str, ModelPrice] = {}"]
    lines.append("PRICES: dict[str, ModelPrice] = {")
    for name, price in entries:
        lines.append(f"    {_literal(name)}: ModelPrice(")
        lines.append(f"        input_per_mtok={float(price.input_per_mtok)!r},")
        lines.append(f"        output_per_mtok={float(price.output_per_mtok)!r},")
        lines.append("    ),")
    return [*lines, "}"]


def carries_marker(path: Path) -> bool:
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            head = [handle.readline() for _ in range(_MARKER_SEARCH_LINES)]
    except OSError:
        return False
    return any(line.rstrip("\n") == GENERATED_MARKER for line in head)


def generate_providers(json_path: Path, output: Path | None = None) -> Path:
    """Write ``providers.py`` for ``json_path``; only ever replaces a file with our marker."""
    catalogue = load_catalogue(json_path)
    target = output if output is not None else json_path.with_name("providers.py")
    if target.exists() and not carries_marker(target):
        raise CatalogueError(
            f"{target}: exists and was not generated by roboz (no generated-file marker); "
            "move it away or choose another --output"
        )
    if not target.parent.is_dir():
        raise CatalogueError(f"{target.parent}: no such directory")
    text = render_providers(catalogue, source_name=json_path.name)
    temporary = target.with_name(f".{target.name}.tmp")
    try:
        temporary.write_text(text, encoding="utf-8")
        temporary.replace(target)
    except OSError as error:
        temporary.unlink(missing_ok=True)
        raise CatalogueError(f"{target}: cannot write: {error}") from None
    return target
