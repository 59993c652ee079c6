"""`create_app(routing=...)`: a router picked per request, or the request refused."""

from __future__ import annotations

from starlette.testclient import TestClient
from starlette.types import Receive, Scope, Send

from tidemill.llm import ScriptedModel
from tidemill.llm.proxy import AccessRecord, ModelRouter, ProxyError, create_app, track

HELLO = [{"role": "user", "content": "Hello"}]


async def by_header(scope: Scope, model: str | None) -> ModelRouter:
    headers = dict(scope["headers"])
    who = headers.get(b"x-who", b"").decode()
    if not who:
        raise ProxyError("Who are you?", status=403, code="permission_denied")
    return ModelRouter(aliases={f"{who}-model": ScriptedModel([f"hi {who}"])})


def test_each_request_is_served_by_the_router_its_routing_picked() -> None:
    fallback = ModelRouter(aliases={"shared": ScriptedModel(["shared"])})
    with TestClient(create_app(fallback, routing=by_header)) as proxy:
        ann = proxy.post(
            "/v1/chat/completions",
            json={"model": "ann-model", "messages": HELLO},
            headers={"x-who": "ann"},
        )
        listed = proxy.get("/v1/models", headers={"x-who": "bob"})
        refused = proxy.post("/v1/chat/completions", json={"model": "shared", "messages": HELLO})
        not_bobs = proxy.post(
            "/v1/chat/completions",
            json={"model": "ann-model", "messages": HELLO},
            headers={"x-who": "bob"},
        )
    assert ann.json()["choices"][0]["message"]["content"] == "hi ann"
    assert [m["id"] for m in listed.json()["data"]] == ["bob-model"]
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "permission_denied"
    assert not_bobs.status_code == 404


def test_track_gives_a_wrapper_the_record_the_handler_fills() -> None:
    seen: list[AccessRecord] = []
    inner = create_app(ModelRouter(aliases={"echo": ScriptedModel(["hi"])}), access_log=False)

    async def wrapper(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            seen.append(track(scope))
        await inner(scope, receive, send)

    with TestClient(wrapper) as proxy:
        proxy.post("/v1/chat/completions", json={"model": "echo", "messages": HELLO})
    (record,) = seen
    assert record.model_name == "echo" and record.usage is not None
