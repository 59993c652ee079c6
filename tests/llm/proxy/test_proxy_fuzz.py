"""A fuzz of the Chat Completions request schema against the proxy (issue 18's harness).

Requests valid and mutated (hostile strings, deep and wide values, wrong
types, broken bytes) go to the proxy served on loopback, in front of the
offline model and a stand-in for each wire-format family (`proxy_vendors`).
Whatever the client sends: no 5xx, every 4xx an OpenAI error body, no key
of the proxy's in an answer, nothing logged as an error. Bounded and
deterministic: a fixed number of examples, derandomized, no example database.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from proxy_vendors import FAMILIES, SECRETS, VendorServer, vendor_proxy

from tidemill.llm.proxy._limits import MAX_DEPTH

_FUZZ = settings(
    # A failing example is reported as found: shrinking big bodies can take minutes.
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    max_examples=120,
    derandomize=True,
    database=None,
    deadline=None,
    # The client fixture is shared by the examples of a test on purpose: it holds no state.
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)
"""The same examples on every run, in a few seconds per test."""

# The statuses a client's request may get; 429 and up come only from an upstream that said so.
_CLIENT_STATUSES = frozenset({200, 400, 401, 403, 404, 405, 408, 413, 415, 422})


class _Errors(logging.Handler):
    """Keeps the proxy's log records at error level (an unexpected failure's traceback)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[VendorServer, str]]:
    with vendor_proxy(tmp_path_factory.mktemp("aws")) as both:
        yield both


@pytest.fixture
def client(served: tuple[VendorServer, str]) -> Iterator[httpx.Client]:
    """A client of the proxy; the test fails if the proxy logged an error meanwhile."""
    errors = _Errors()
    logger = logging.getLogger("tidemill.llm.proxy")
    logger.addHandler(errors)
    try:
        with httpx.Client(base_url=served[1], timeout=20.0) as http:
            yield http
    finally:
        logger.removeHandler(errors)
    assert not errors.records, [r.getMessage() for r in errors.records]


def send(client: httpx.Client, body: bytes | object, **headers: str) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers.setdefault("content-type", "application/json")
    return client.post("/v1/chat/completions", content=content, headers=headers)


def check(answer: httpx.Response) -> None:
    """The invariants of every answer to a client's request."""
    text = answer.text
    assert answer.status_code in _CLIENT_STATUSES, (answer.status_code, text[:500])
    assert not any(secret in text for secret in SECRETS)
    kind = answer.headers.get("content-type", "")
    if answer.status_code >= 400:
        assert kind == "application/json", kind
        error = answer.json()["error"]
        assert set(error) == {"message", "type", "param", "code"}, error
        assert isinstance(error["message"], str) and error["message"]
        assert error["type"] in ("invalid_request_error", "authentication_error"), error
        return
    if kind.startswith("text/event-stream"):
        events = [line[6:] for line in text.splitlines() if line.startswith("data: ")]
        assert (events and events[-1] in ("[DONE]",)) or "event: error" in text, text[-300:]
        for event in events[:-1]:
            data = json.loads(event)
            if "error" in data:
                assert data["error"]["code"] != "internal_error", data
        return
    assert kind == "application/json", kind
    assert answer.json()["object"] == "chat.completion"


# -- strategies -----------------------------------------------------------------------------

HOSTILE = [
    "",
    " ",
    "\x00",
    "\x00\x01\x1f\x7f",
    "\ud800",  # a lone surrogate, sent as the JSON escape "\ud800"
    "\udfff\ud800",
    "\U0001f600\u200d\u202e",
    "{{model}} %s %n {0}",
    '\\"\\',
    "</script><script>",
    "\r\n\r\nHTTP/1.1 200 OK\r\n",
    "data:image/png;base64,iVBORw0KGgo=",
    "data:,",
    "data:image/png;base64,!!!",
    "http://169.254.169.254/latest/meta-data/",
    "http://127.0.0.1:1/",
    "file:///etc/passwd",
    "s3://bucket/key.png",
    "gs://bucket/key.png",
    "sk-ant-api03-" + "A" * 40,
    "null",
    "NaN",
    "1e309",
    "fake",
    "scripted",
    "*",
    "openai:",
    "bedrock:",
    "vllm:x",
    "ollama:llama3",
    "openai-compatible:x",
    ":",
]
"""Strings that have broken servers: controls, surrogates, huge, templates, URLs, specs."""

texts = st.one_of(
    st.text(max_size=30),
    st.sampled_from(HOSTILE),
    st.sampled_from([5_000, 40_000]).map(lambda n: "a" * n),  # long: named, not shown
)
names = st.one_of(st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_-]{0,20}", fullmatch=True), texts)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(),  # NaN and infinities too: Python's JSON writes and reads them
    texts,
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(texts, inner, max_size=4)),
    max_leaves=12,
)


def _schema(depth: int = 2) -> st.SearchStrategy[dict[str, Any]]:
    leaf = st.sampled_from(
        [{"type": t} for t in ("string", "integer", "number", "boolean", "null")]
        + [{"enum": ["a", "b"]}, {"type": "string", "format": "date-time"}]
    )
    if depth == 0:
        return leaf
    inner = _schema(depth - 1)
    return st.one_of(
        leaf,
        st.builds(lambda i: {"type": "array", "items": i}, inner),
        st.builds(
            lambda props, strict: {
                "type": "object",
                "properties": props,
                **({"required": list(props), "additionalProperties": False} if strict else {}),
            },
            st.dictionaries(names, inner, max_size=3),
            st.booleans(),
        ),
        st.builds(lambda a, b: {"anyOf": [a, b]}, inner, inner),
    )


schemas = st.builds(
    lambda props: {"type": "object", "properties": props},
    st.dictionaries(names, _schema(), max_size=3),
)
parts = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, texts),
    st.builds(
        lambda url, detail: {"type": "image_url", "image_url": {"url": url, "detail": detail}},
        st.sampled_from(
            [
                "data:image/png;base64,iVBORw0KGgo=",
                "data:image/jpeg;base64,/9j/4AAQ",
                "https://example.invalid/cat.png",
            ]
        )
        | texts,
        st.sampled_from(["auto", "low", "high"]),
    ),
)
contents = st.one_of(texts, st.lists(parts, min_size=1, max_size=3))
call_ids = st.from_regex(r"call_[a-z0-9]{1,8}", fullmatch=True)


@st.composite
def conversations(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Messages a client could send: a system prompt, turns, tool calls and their results."""
    messages: list[dict[str, Any]] = []
    if draw(st.booleans()):
        role = draw(st.sampled_from(["system", "developer"]))
        messages.append({"role": role, "content": draw(texts)})
    for _ in range(draw(st.integers(0, 2))):
        messages.append({"role": "user", "content": draw(contents)})
        ids = draw(st.lists(call_ids, max_size=2, unique=True))
        if ids:
            calls = [
                {
                    "id": cid,
                    "type": "function",
                    "function": {"name": draw(names), "arguments": draw(texts | st.just("{}"))},
                }
                for cid in ids
            ]
            messages.append(
                {"role": "assistant", "content": draw(st.none() | texts), "tool_calls": calls}
            )
            messages += [
                {"role": "tool", "tool_call_id": cid, "content": draw(texts)} for cid in ids
            ]
        else:
            messages.append({"role": "assistant", "content": draw(texts)})
    messages.append({"role": "user", "content": draw(contents)})
    return messages


tools = st.lists(
    st.builds(
        lambda name, description, parameters: {
            "type": "function",
            "function": {"name": name, "description": description, "parameters": parameters},
        },
        names,
        texts,
        schemas,
    ),
    max_size=3,
)
response_formats = st.one_of(
    st.just({"type": "text"}),
    st.just({"type": "json_object"}),
    st.builds(
        lambda schema, strict: {
            "type": "json_schema",
            "json_schema": {"name": "answer", "schema": schema, "strict": strict},
        },
        schemas,
        st.booleans(),
    ),
)
OPTIONAL: dict[str, st.SearchStrategy[Any]] = {
    "stream": st.booleans(),
    "stream_options": st.builds(lambda u: {"include_usage": u}, st.booleans()),
    "temperature": st.floats(0, 2),
    "top_p": st.floats(0, 1),
    "max_tokens": st.integers(1, 4096),
    "max_completion_tokens": st.integers(1, 4096),
    "stop": texts | st.lists(texts, max_size=4),
    "seed": st.integers(0, 2**31),
    "tools": tools,
    "tool_choice": st.sampled_from(["auto", "none", "required"]),
    "response_format": response_formats,
    "n": st.just(1),
    "user": texts,
    "metadata": st.dictionaries(names, texts, max_size=3),
    "presence_penalty": st.floats(-2, 2),
    "frequency_penalty": st.floats(-2, 2),
    "parallel_tool_calls": st.booleans(),
    "logit_bias": st.dictionaries(
        st.from_regex(r"[0-9]{1,5}", fullmatch=True), st.integers(-100, 100), max_size=3
    ),
    "reasoning_effort": st.sampled_from(["low", "medium", "high"]),
    "logprobs": st.booleans(),
    "top_logprobs": st.integers(0, 20),
}
models = st.one_of(st.sampled_from(list(FAMILIES)), st.sampled_from(list(FAMILIES)), texts)
requests = st.builds(
    lambda model, messages, optional: {"model": model, "messages": messages, **optional},
    models,
    conversations(),
    st.fixed_dictionaries({}, optional=OPTIONAL),
)


def _places(body: object, most: int = 200) -> list[tuple[object, ...]]:
    """The paths of the first `most` values inside a decoded body (not the body itself)."""
    places: list[tuple[object, ...]] = []
    stack: list[tuple[object, tuple[object, ...]]] = [(body, ())]
    while stack and len(places) < most:
        value, path = stack.pop(0)
        if isinstance(value, dict):
            items: Any = value.items()
        elif isinstance(value, list):
            items = enumerate(value)
        else:
            continue
        for key, child in items:
            places.append((*path, key))
            stack.append((child, (*path, key)))
    return places[:most]


def _parent(body: Any, path: tuple[object, ...]) -> Any:
    for key in path[:-1]:
        body = body[key]
    return body


@st.composite
def mutated(draw: st.DrawFn, values: st.SearchStrategy[Any] = json_values) -> Any:
    """A valid request, then a few changes anywhere in it: a value of another type, a value
    gone, a field no one knows."""
    body = copy.deepcopy(draw(requests))  # strategies share their values: change a copy
    for _ in range(draw(st.integers(1, 3))):
        places = _places(body)
        if not places:
            break
        path = draw(st.sampled_from(places))
        parent = _parent(body, path)
        change = draw(st.sampled_from(["replace", "delete", "add"]))
        if change == "replace":
            parent[path[-1]] = draw(values)
        elif change == "delete":
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent[draw(texts)] = draw(values)
        else:
            parent.append(draw(values))
    return body


def _deep(levels: int, kind: str) -> Any:
    value: Any = "x"
    for _ in range(levels):
        value = [value] if kind == "list" else {"a": value}
    return value


big_values = st.one_of(
    st.builds(
        _deep,
        st.sampled_from([MAX_DEPTH - 8, MAX_DEPTH, MAX_DEPTH + 1, 300]),
        st.sampled_from(["list", "dict"]),
    ),
    st.builds(lambda n, v: [v] * n, st.sampled_from([1_000, 20_000]), scalars),
    st.builds(lambda n: {f"k{i}": i for i in range(n)}, st.sampled_from([1_000, 20_000])),
    st.builds(lambda n: "x" * n, st.sampled_from([100_000, 1_000_000])),
)
"""Deep and wide values: past the depth limit and around it, long arrays, big objects, long text.

Bodies deeper than Python's recursion limit are sent as bytes in `test_proxy_limits`: here the
client's own `json.dumps` and Hypothesis's printing would recurse."""


# -- the fuzz -------------------------------------------------------------------------------


class TestFuzz:
    @_FUZZ
    @given(body=requests)
    def test_valid_requests(self, client: httpx.Client, body: dict[str, Any]) -> None:
        check(send(client, body))

    @_FUZZ
    @given(body=mutated())
    def test_mutated_requests(self, client: httpx.Client, body: Any) -> None:
        check(send(client, body))

    @settings(_FUZZ, max_examples=40)
    @given(body=mutated(big_values))
    def test_deep_and_wide_values(self, client: httpx.Client, body: Any) -> None:
        check(send(client, body))

    @_FUZZ
    @given(body=json_values | st.dictionaries(texts, json_values, max_size=6))
    def test_any_json_at_all(self, client: httpx.Client, body: Any) -> None:
        check(send(client, body))

    @_FUZZ
    @given(body=requests, data=st.data())
    def test_broken_bytes(
        self, client: httpx.Client, body: dict[str, Any], data: st.DataObject
    ) -> None:
        text = json.dumps(body, ensure_ascii=data.draw(st.booleans()))
        # A lone surrogate goes out as its raw bytes (`\xed\xa0\x80`), not as an escape.
        raw = bytearray(text.encode("utf-8", "surrogatepass"))
        for _ in range(data.draw(st.integers(1, 4))):
            at = data.draw(st.integers(0, len(raw)))
            change = data.draw(st.sampled_from(["flip", "insert", "cut", "surrogate", "truncate"]))
            if change == "flip" and at < len(raw):
                raw[at] ^= 1 << data.draw(st.integers(0, 7))
            elif change == "insert":
                raw[at:at] = data.draw(st.binary(min_size=1, max_size=4))
            elif change == "cut":
                del raw[at : at + data.draw(st.integers(1, 8))]
            elif change == "surrogate":
                raw[at:at] = b"\xed\xa0\x80"
            else:
                del raw[at:]
        check(send(client, bytes(raw)))

    @pytest.mark.parametrize(
        "raw",
        [
            b"",
            b"null",
            b"[]",
            b"\xef\xbb\xbf{}",  # a UTF-8 byte order mark
            '{"model":"offline","messages":[]}'.encode("utf-16"),
            b'{"model":"offline","messages":[{"role":"user","content":"x"}],"seed":'
            + b"9" * 5000
            + b"}",
            b'{"model":"offline","messages":[{"role":"user","content":"x"}],"temperature":NaN}',
            b'{"model":"offline","model":"openai","messages":[{"role":"user","content":"x"}]}',
            b'{"model":"offline","messages":[{"role":"user","content":"\\ud800\\udc00\\udc00"}]}',
        ],
    )
    def test_odd_bodies(self, client: httpx.Client, raw: bytes) -> None:
        check(send(client, raw))

    @pytest.mark.parametrize(
        "headers",
        [
            {"content-type": "text/plain"},
            {"content-type": "application/json; charset=latin-1"},
            {"authorization": "Bearer " + "x" * 10_000},
            {"content-encoding": "gzip"},
        ],
    )
    def test_odd_headers(self, client: httpx.Client, headers: dict[str, str]) -> None:
        check(
            send(
                client,
                {"model": "offline", "messages": [{"role": "user", "content": "x"}]},
                **headers,
            )
        )
