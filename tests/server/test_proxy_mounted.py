"""The proxy at `/v1` of the server: Tidemill tokens, provider resources, usage, the SDKs."""

from __future__ import annotations

import json
from collections.abc import Iterator

import anthropic
import httpx
import openai
import pytest
from tests.llm.llm_replay import ReplayServer, Reply, fixture_bytes
from tests.server.conftest import Live

KEY = "sk-upstream-secret-0123456789"
RESOURCE = "f/team/openai"


@pytest.fixture
def upstream() -> Iterator[ReplayServer]:
    """A local OpenAI-compatible server that plays recorded answers."""
    server = ReplayServer().start()
    yield server
    server.stop()


@pytest.fixture
def served(live: Live, upstream: ReplayServer) -> Live:
    """`f/team/openai`: an OpenAI provider resource whose key is a secret variable."""
    live.ws.write("f/team/openai_key", "variable", KEY, secret=True)
    live.ws.write(
        RESOURCE,
        "resource",
        {
            "api_key": "$var:f/team/openai_key",
            "base_url": f"{upstream.url}/v1",
            "model": "gpt-4o",
        },
        resource_type="openai",
    )
    return live


def text_reply() -> Reply:
    return Reply(fixture_bytes("openai-chat/text.json"), content_type="application/json")


def stream_reply() -> Reply:
    return Reply(fixture_bytes("openai-chat/text-stream.sse"))


def sdk(live: Live, token: str) -> openai.OpenAI:
    return openai.OpenAI(api_key=token, base_url=f"{live.url}/v1", max_retries=0)


def usage_of(live: Live, user: str = "ada") -> list[dict[str, object]]:
    with live.client(user) as client:
        answer = client.get("/api/proxy/usage")
    assert answer.status_code == 200, answer.text
    rows: list[dict[str, object]] = answer.json()
    return rows


def test_the_openai_sdk_calls_a_provider_resource_with_a_tidemill_token(
    served: Live, upstream: ReplayServer
) -> None:
    upstream.replies.append(text_reply())
    token = served.token("vic", "proxy:write")
    answer = sdk(served, token).chat.completions.create(
        model=f"{RESOURCE}:gpt-4o", messages=[{"role": "user", "content": "Hello"}]
    )
    assert answer.choices[0].message.content
    assert answer.model == f"{RESOURCE}:gpt-4o"
    (seen,) = upstream.seen
    assert seen.path == "/v1/chat/completions"
    assert seen.headers["authorization"] == f"Bearer {KEY}"  # the resource's key, not the token
    assert seen.body["model"] == "gpt-4o"
    assert token not in json.dumps(seen.headers)
    assert KEY not in answer.model_dump_json()
    # The call is recorded with vic and the token.
    (row,) = usage_of(served, "vic")
    token_id = token.split("_")[2]
    assert (row["user"], row["token_id"], row["resource"], row["status"]) == (
        "vic",
        token_id,
        RESOURCE,
        200,
    )
    assert row["provider"] == "openai" and row["input_tokens"] and row["output_tokens"]


def test_a_stream_through_the_sdk_and_the_resource_default_model(
    served: Live, upstream: ReplayServer
) -> None:
    upstream.replies.append(stream_reply())
    token = served.token("olga", "proxy:write:f/team/*")
    stream = sdk(served, token).chat.completions.create(
        model=RESOURCE,
        messages=[{"role": "user", "content": "Hello"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens
    (seen,) = upstream.seen
    assert seen.body["model"] == "gpt-4o" and seen.body["stream"] is True
    assert seen.headers["authorization"] == f"Bearer {KEY}"
    (row,) = usage_of(served, "olga")
    assert row["model"] == RESOURCE and row["output_tokens"] == chunks[-1].usage.completion_tokens


def test_fields_and_headers_naming_another_url_do_not_move_the_upstream(
    served: Live, upstream: ReplayServer
) -> None:
    elsewhere = ReplayServer().start()
    try:
        upstream.replies.append(text_reply())
        client = openai.OpenAI(
            api_key=served.tokens["ada"],
            base_url=f"{served.url}/v1",
            max_retries=0,
            default_headers={
                "X-Forwarded-Host": "127.0.0.1:1",
                "X-Base-Url": elsewhere.url,
                "OpenAI-Base-URL": elsewhere.url,
                "Forwarded": "host=evil.example",
            },
        )
        answer = client.chat.completions.create(
            model=RESOURCE,
            messages=[{"role": "user", "content": "Hello"}],
            extra_body={"base_url": elsewhere.url, "api_base": elsewhere.url},
            extra_headers={"X-Api-Base": elsewhere.url},
        )
        assert answer.choices[0].message.content
        assert len(upstream.seen) == 1 and not elsewhere.seen
    finally:
        elsewhere.stop()


def test_a_user_who_may_not_read_the_resource_is_refused_without_the_key(
    served: Live, upstream: ReplayServer
) -> None:
    client = sdk(served, served.token("max", "*"))
    with pytest.raises(openai.NotFoundError) as refused:
        client.chat.completions.create(
            model=RESOURCE, messages=[{"role": "user", "content": "Hello"}]
        )
    assert refused.value.code == "model_not_found"
    assert KEY not in refused.value.response.text and not upstream.seen
    listed = [m.id for m in client.models.list()]
    assert RESOURCE not in listed
    (row,) = usage_of(served, "max")  # a refused call is recorded too, with no resource
    assert (row["status"], row["resource"]) == (404, None)


def test_scopes_narrow_what_a_token_may_call(served: Live, upstream: ReplayServer) -> None:
    read_only = sdk(served, served.token("ada", "proxy:read"))
    assert RESOURCE in [m.id for m in read_only.models.list()]
    with pytest.raises(openai.PermissionDeniedError):
        read_only.chat.completions.create(
            model=RESOURCE, messages=[{"role": "user", "content": "Hello"}]
        )
    other_folder = sdk(served, served.token("ada", "proxy:write:f/other/*"))
    with pytest.raises(openai.PermissionDeniedError):
        other_folder.chat.completions.create(
            model=RESOURCE, messages=[{"role": "user", "content": "Hello"}]
        )
    runs_only = sdk(served, served.token("ada", "runs:write"))
    with pytest.raises(openai.PermissionDeniedError):
        runs_only.models.list()
    assert not upstream.seen


def test_no_token_a_bad_one_and_a_revoked_one_are_refused(
    served: Live, upstream: ReplayServer
) -> None:
    with httpx.Client(base_url=served.url) as anonymous:
        answer = anonymous.post("/v1/chat/completions", json={"model": RESOURCE})
    assert answer.status_code == 401
    assert answer.json()["error"]["code"] == "invalid_api_key"
    with pytest.raises(openai.AuthenticationError):
        sdk(served, "tm_pat_nope_nope").models.list()
    made = served.ws.acting_as("vic").create_token("short-lived", scopes=["proxy:write"])
    client = sdk(served, made.text)
    assert RESOURCE in [m.id for m in client.models.list()]
    served.ws.acting_as("vic").revoke_token(made.token.id)
    with pytest.raises(openai.AuthenticationError):
        client.chat.completions.create(
            model=RESOURCE, messages=[{"role": "user", "content": "Hello"}]
        )
    assert not upstream.seen


def test_an_admin_alias_names_a_resource_and_a_model(served: Live, upstream: ReplayServer) -> None:
    served.ws.add_folder("proxy")
    served.ws.grant("f/proxy", "g/readers", "viewer")
    aliases = {"fast": f"{RESOURCE}:gpt-4o-mini"}
    served.ws.write("f/proxy/aliases", "variable", json.dumps(aliases))
    upstream.replies.append(text_reply())
    client = sdk(served, served.token("vic", "proxy:write"))
    assert {"fast", RESOURCE} <= {m.id for m in client.models.list()}
    answer = client.chat.completions.create(
        model="fast", messages=[{"role": "user", "content": "Hello"}]
    )
    assert answer.model == "fast"
    assert upstream.seen[0].body["model"] == "gpt-4o-mini"
    # max may not read the resource: the alias is not his to use.
    with pytest.raises(openai.NotFoundError):
        sdk(served, served.token("max")).chat.completions.create(
            model="fast", messages=[{"role": "user", "content": "Hello"}]
        )


def test_the_anthropic_sdk_calls_a_resource_through_the_messages_api(
    served: Live, upstream: ReplayServer
) -> None:
    upstream.replies += [text_reply(), stream_reply()]
    token = served.token("vic", "proxy:write")
    client = anthropic.Anthropic(api_key=token, base_url=served.url, max_retries=0)
    assert RESOURCE in [m.id for m in client.models.list()]  # it signs in with x-api-key
    message = client.messages.create(
        model=RESOURCE,
        max_tokens=64,
        system="Be brief.",
        messages=[{"role": "user", "content": "Hello"}],
    )
    assert message.content[0].type == "text" and message.content[0].text
    assert message.stop_reason == "end_turn" and message.usage.output_tokens
    first = upstream.seen[0]
    assert first.headers["authorization"] == f"Bearer {KEY}"
    assert first.body["messages"][0] == {"role": "system", "content": "Be brief."}
    with client.messages.stream(
        model=RESOURCE, max_tokens=64, messages=[{"role": "user", "content": "Hello"}]
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text and final.usage.output_tokens
    assert KEY not in final.model_dump_json()
    rows = usage_of(served, "vic")
    assert [(r["model"], r["status"]) for r in rows] == [(RESOURCE, 200), (RESOURCE, 200)]
    assert all(r["output_tokens"] for r in rows)
    # What the endpoint does not translate is refused, naming the field.
    with pytest.raises(anthropic.BadRequestError) as refused:
        client.messages.create(
            model=RESOURCE,
            max_tokens=64,
            messages=[{"role": "user", "content": "Hello"}],
            thinking={"type": "enabled", "budget_tokens": 1024},
        )
    assert "thinking" in str(refused.value)
    bad = anthropic.Anthropic(api_key="tm_pat_nope_nope", base_url=served.url, max_retries=0)
    with pytest.raises(anthropic.AuthenticationError):
        bad.messages.create(
            model=RESOURCE, max_tokens=8, messages=[{"role": "user", "content": "Hello"}]
        )


def test_only_an_admin_reads_everyone_s_usage(served: Live, upstream: ReplayServer) -> None:
    upstream.replies.append(text_reply())
    sdk(served, served.token("vic", "proxy:write")).chat.completions.create(
        model=RESOURCE, messages=[{"role": "user", "content": "Hello"}]
    )
    assert [r["user"] for r in usage_of(served, "ada")] == ["vic"]
    assert usage_of(served, "olga") == []


def test_an_upstream_that_echoes_the_key_does_not_show_it(
    served: Live, upstream: ReplayServer
) -> None:
    echoed = {"error": {"message": f"Incorrect API key provided: {KEY}.", "type": "auth"}}
    upstream.replies.append(
        Reply(json.dumps(echoed).encode(), status=401, content_type="application/json")
    )
    with httpx.Client(base_url=served.url, headers={"x-api-key": served.tokens["ada"]}) as client:
        answer = client.post(
            "/v1/chat/completions",
            json={"model": RESOURCE, "messages": [{"role": "user", "content": "Hello"}]},
        )
    assert answer.status_code >= 400 and "error" in answer.json()
    assert KEY not in answer.text and len(upstream.seen) == 1


@pytest.mark.parametrize("name", ["f/team/../openai", "f/" + "x" * 300, "gpt-4o", "f/team/script"])
def test_names_that_are_no_usable_resource_are_client_errors(served: Live, name: str) -> None:
    with served.client("ada") as client:
        answer = client.post(
            "/v1/chat/completions",
            json={"model": name, "messages": [{"role": "user", "content": "Hello"}]},
        )
    assert answer.status_code in (400, 404), answer.text
    assert answer.json()["error"]["message"]


# A provider type whose key may be left out, the model it serves, and the server's
# environment variables that hold the operator's credentials for it.
OWN_URL_CASES = [
    ("bedrock", "us.amazon.nova-micro-v1:0", {"region": "us-east-1"},
     {"AWS_BEARER_TOKEN_BEDROCK": "operator-bedrock-key"}),
    ("vertex", "gemini-2.0-flash", {"project": "acme", "region": "us-east5"},
     {"GOOGLE_OAUTH_ACCESS_TOKEN": "ya29.operator-token"}),
    ("azure", "gpt-4o", {}, {"AZURE_OPENAI_API_KEY": "operator-azure-key"}),
    ("openai_compatible", "llama3", {}, {"OPENAI_COMPATIBLE_API_KEY": "operator-compat-key"}),
]  # fmt: skip


@pytest.mark.parametrize(("kind", "model", "fields", "env"), OWN_URL_CASES)
def test_a_resource_naming_its_own_url_gets_no_key_of_the_server(
    live: Live,
    upstream: ReplayServer,
    monkeypatch: pytest.MonkeyPatch,
    kind: str,
    model: str,
    fields: dict[str, str],
    env: dict[str, str],
) -> None:
    # The server's environment holds the operator's credentials; max points a
    # resource of his own at a server he controls and leaves its key out.
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    live.ws.acting_as("max").write(
        "u/max/collector",
        "resource",
        {"base_url": f"{upstream.url}/v1", **fields},
        resource_type=kind,
    )
    upstream.replies.append(text_reply())
    call = {"model": f"u/max/collector:{model}", "messages": [{"role": "user", "content": "Hi"}]}
    client = sdk(live, live.token("max", "proxy:write"))
    if kind == "openai_compatible":  # its key is optional: the call goes out without one
        client.chat.completions.create(**call)
        (seen,) = upstream.seen
        assert "authorization" not in seen.headers
    else:
        with pytest.raises(openai.APIStatusError) as refused:
            client.chat.completions.create(**call)
        assert refused.value.status_code == 400, refused.value.message
        assert not any(secret in refused.value.message for secret in env.values())
        assert upstream.seen == []
    for seen in upstream.seen:  # a keyless call may go out, but never with the operator's key
        sent = json.dumps(dict(seen.headers)) + json.dumps(seen.body)
        assert not any(secret in sent for secret in env.values()), sent
