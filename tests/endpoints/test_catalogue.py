"""models.json validation, providers.py generation and the bundled inventory."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import roboz.endpoints.inventory as inventory_package
from roboz import Agent
from roboz.endpoints import CatalogueError, ChatModelSpec, ModelPrice, TranscriptionEndpoint
from roboz.endpoints.catalogue import load_catalogue, parse_catalogue
from roboz.endpoints.codegen import GENERATED_MARKER, generate_providers, render_providers
from roboz.endpoints.inventory import cerebras, groq, openrouter
from roboz.llm import LLMEndpoint, call_llm_api
from roboz.models import Message, Role
from roboz.tools import stop
from tests.endpoints.openai_fake import FakeOpenAIServer, Reply

INVENTORY_DIR = Path(inventory_package.__file__).parent


def catalogue_json(**model: Any) -> str:
    entry = {"model_id": "m-1", "endpoint_type": "llm", "max_context_tokens": 1000, **model}
    entry = {key: value for key, value in entry.items() if value is not None}
    return json.dumps(
        {
            "providers": {
                "svc": {
                    "base_url": "http://127.0.0.1:9/v1",
                    "api_key_env": "SVC_KEY",
                    "models": {"chat": entry},
                }
            }
        }
    )


def test_bundled_routes_are_typed_attributes_with_name_and_context() -> None:
    endpoint = openrouter.z_ai__glm_5_3
    assert isinstance(endpoint, LLMEndpoint)
    assert endpoint.model_name == "z-ai/glm-5.3"
    assert endpoint.max_context_tokens == 202_752
    assert endpoint.accepts_images is False
    assert isinstance(cerebras.gpt_oss_120b, LLMEndpoint)
    assert isinstance(groq.whisper_large_v3, TranscriptionEndpoint)


def test_bundled_inventory_imports_without_any_credentials() -> None:
    environment = {
        key: value
        for key, value in os.environ.items()
        if not key.endswith(("_API_KEY", "_KEY")) and key != "ROBOZ_ENV_PASSWORD"
    }
    script = (
        "from roboz.endpoints.inventory import openrouter, cerebras, groq\n"
        "e = openrouter.z_ai__glm_5_3\n"
        "print(e.model_name, e.max_context_tokens, e.api_key_env)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], env=environment, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["z-ai/glm-5.3", "202752", "OPENROUTER_API_KEY"]


def test_bundled_providers_module_matches_its_json() -> None:
    catalogue = load_catalogue(INVENTORY_DIR / "models.json")
    assert render_providers(catalogue) == (INVENTORY_DIR / "providers.py").read_text()


@pytest.mark.parametrize(
    ("model", "message"),
    [
        (
            {"max_context_tokens": None},
            "$.providers.svc.models.chat.max_context_tokens: required for llm models",
        ),
        (
            {"endpoint_type": "transcription"},
            "$.providers.svc.models.chat.max_context_tokens: not accepted for transcription",
        ),
        ({"max_context_tokens": "big"}, "$.providers.svc.models.chat.max_context_tokens"),
        ({"max_context_tokens": 0}, "$.providers.svc.models.chat.max_context_tokens"),
        ({"endpoint_type": "embedding"}, "$.providers.svc.models.chat.endpoint_type"),
        ({"accepts_images": "yes"}, "$.providers.svc.models.chat.accepts_images"),
        ({"api_key": "sk-1"}, "$.providers.svc.models.chat.api_key: Extra inputs"),
    ],
)
def test_model_errors_name_the_json_path(model: dict[str, Any], message: str) -> None:
    with pytest.raises(CatalogueError) as caught:
        parse_catalogue(catalogue_json(**model), source="models.json")
    assert str(caught.value).startswith("models.json: ")
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("key", "path"),
    [
        ("my-model", '$.providers.svc.models["my-model"]'),
        ("_hidden", "$.providers.svc.models._hidden"),
        ("class", "$.providers.svc.models.class"),
        ("1st", '$.providers.svc.models["1st"]'),
    ],
)
def test_keys_must_be_public_identifiers(key: str, path: str) -> None:
    data = json.loads(catalogue_json())
    models = data["providers"]["svc"]["models"]
    models[key] = models.pop("chat")
    with pytest.raises(CatalogueError, match="public Python identifier") as caught:
        parse_catalogue(json.dumps(data))
    assert path in str(caught.value)


def test_invalid_json_names_line_and_column() -> None:
    with pytest.raises(CatalogueError, match=r"models.json: not valid JSON \(line 2, column"):
        parse_catalogue('{\n  "providers": ,\n}')


def test_generated_module_imports_and_builds_endpoints(tmp_path: Path) -> None:
    source = tmp_path / "models.json"
    source.write_text(catalogue_json(accepts_images=True))

    target = generate_providers(source)

    assert target == tmp_path / "providers.py"
    assert GENERATED_MARKER in target.read_text().splitlines()[:5]
    spec = importlib.util.spec_from_file_location("generated_providers", target)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    endpoint = module.svc.chat
    assert (endpoint.model_name, endpoint.max_context_tokens) == ("m-1", 1000)
    assert endpoint.accepts_images is True
    assert endpoint.api_key_env == "SVC_KEY"
    assert module.__all__ == ["svc"]


def test_generate_replaces_only_marked_files(tmp_path: Path) -> None:
    source = tmp_path / "models.json"
    source.write_text(catalogue_json())
    handwritten = tmp_path / "providers.py"
    handwritten.write_text("# my own code\n")

    with pytest.raises(CatalogueError, match="no generated-file marker"):
        generate_providers(source)
    assert handwritten.read_text() == "# my own code\n"

    handwritten.unlink()
    generate_providers(source)
    source.write_text(catalogue_json(model_id="m-2"))
    generate_providers(source)
    assert '"m-2"' in handwritten.read_text()


def test_chat_model_spec_builds_a_lazy_endpoint() -> None:
    spec = ChatModelSpec(
        model="vision",
        max_context_tokens=128_000,
        api_key_env="NOT_SET_ANYWHERE",
        accepts_images=True,
    )
    endpoint = spec.endpoint()
    assert endpoint.model_name == "vision"
    assert endpoint.accepts_images is True
    assert endpoint.api_key_env == "NOT_SET_ANYWHERE"


def test_generated_catalogue_endpoint_calls_its_server_with_its_env_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, openai_server: FakeOpenAIServer
) -> None:
    source = tmp_path / "models.json"
    data = json.loads(catalogue_json())
    data["providers"]["svc"]["base_url"] = openai_server.base_url
    source.write_text(json.dumps(data))
    spec = importlib.util.spec_from_file_location("local_catalogue", generate_providers(source))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setenv("SVC_KEY", "sk-catalogue")
    openai_server.enqueue(Reply(text="from the catalogue"))

    text, _usage = call_llm_api(module.svc.chat, [Message(role=Role.USER, content="hi")])

    assert text == "from the catalogue"
    request = openai_server.requests[0]
    assert request.headers["authorization"] == "Bearer sk-catalogue"
    assert request.json()["model"] == "m-1"


def test_prices_reach_the_spec_and_the_generated_module(tmp_path: Path) -> None:
    source = tmp_path / "models.json"
    source.write_text(catalogue_json(input_price_per_mtok=0.25, output_price_per_mtok=2))

    spec = load_catalogue(source).chat_models()[("svc", "chat")]
    assert spec.price == ModelPrice(input_per_mtok=0.25, output_per_mtok=2.0)
    assert spec.price.cost(input_tokens=2_000_000, output_tokens=500_000) == 1.5

    module_path = generate_providers(source)
    module_spec = importlib.util.spec_from_file_location("priced_providers", module_path)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    assert {"svc.chat": ModelPrice(0.25, 2.0)} == module.PRICES
    assert module.svc.chat.name in module.PRICES
    # The endpoints carry their price, so runs can report what their calls cost.
    assert module.svc.chat.price == ModelPrice(0.25, 2.0)
    assert spec.endpoint().price == spec.price


def test_a_priced_catalogue_endpoint_reports_the_cost_of_a_run_over_http(
    tmp_path: Path, openai_server: FakeOpenAIServer
) -> None:
    data = json.loads(catalogue_json(input_price_per_mtok=1.0, output_price_per_mtok=4.0))
    data["providers"]["svc"]["base_url"] = openai_server.base_url
    spec = parse_catalogue(json.dumps(data)).chat_models()[("svc", "chat")]
    endpoint = spec.endpoint(api_key="sk-test", name="svc.chat")
    openai_server.enqueue(
        Reply(text='{"action": "stop", "value": "hi"}', input_tokens=1000, output_tokens=250)
    )
    agent = Agent(name="priced", agent_endpoint=endpoint, tools=[stop])
    agent.invoke()
    (call,) = agent.last_usage.calls
    assert (call.endpoint, call.model, call.input_tokens, call.output_tokens) == (
        "svc.chat",
        "m-1",
        1000,
        250,
    )
    assert agent.last_usage.cost == pytest.approx((1000 * 1.0 + 250 * 4.0) / 1e6)


def test_models_without_prices_have_none() -> None:
    spec = parse_catalogue(catalogue_json()).chat_models()[("svc", "chat")]
    assert spec.price is None
    assert "PRICES: dict[str, ModelPrice] = {}" in render_providers(
        parse_catalogue(catalogue_json())
    )


@pytest.mark.parametrize(
    ("model", "text"),
    [
        (
            {"input_price_per_mtok": 1.0},
            "$.providers.svc.models.chat.output_price_per_mtok: required with input_price_per_mtok",
        ),
        (
            {"output_price_per_mtok": 1.0},
            "$.providers.svc.models.chat.input_price_per_mtok: required with output_price_per_mtok",
        ),
        (
            {"input_price_per_mtok": -1.0, "output_price_per_mtok": 1.0},
            "$.providers.svc.models.chat.input_price_per_mtok: Input should be greater than or "
            "equal to 0",
        ),
        (
            {"input_price_per_mtok": "1", "output_price_per_mtok": 1.0},
            "$.providers.svc.models.chat.input_price_per_mtok: Input should be a valid number",
        ),
        (
            {
                "endpoint_type": "transcription",
                "max_context_tokens": None,
                "input_price_per_mtok": 1.0,
                "output_price_per_mtok": 1.0,
            },
            "input_price_per_mtok: not accepted for transcription models",
        ),
    ],
)
def test_bad_prices_name_their_json_path(model: dict[str, Any], text: str) -> None:
    with pytest.raises(CatalogueError) as caught:
        parse_catalogue(catalogue_json(**model))
    assert text in str(caught.value)
