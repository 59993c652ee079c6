"""The OpenAI-compatible proxy: any Tidemill model behind OpenAI's Chat Completions API.

Point any OpenAI client at it (`base_url="http://127.0.0.1:4000/v1"`) and
name a model as a spec string (`anthropic:claude-sonnet-4-5`,
`mistral:mistral-large-latest`) or an alias; the request is read into
Tidemill's types, sent through the same adapters the agent runtime uses, and
the answer written back in OpenAI's format, streamed or not. It needs the
`proxy` extra (`pip install 'tidemill[proxy]'`); `tidemill proxy` serves it.

Who owns what: `_request` and `_messages` read requests; `_response` and
`_chunks` write answers (`_wire` holds their shapes); `_errors` maps every
failure to an HTTP status and OpenAI's error body; `_router` turns model
names into models (`_secrets` keeps what to scrub from answers, `_notices`
what the operator must hear once); `_files` decides which image URLs may go
upstream; `_streaming` sends a stream with keep-alives; `_disconnect` stops
the work of a client that left; `_relay` is the fast path for streams from
OpenAI-format upstreams, over the provider layer's lean HTTP/1.1 client
(`tidemill.llm.http._transport`); `_access` writes the access log; `_app`
wires the routes.

Examples:
    >>> from tidemill.llm import ScriptedModel
    >>> from starlette.applications import Starlette
    >>> app = create_app(ModelRouter(aliases={"echo": ScriptedModel(["Hi!"])}))
    >>> isinstance(app, Starlette)
    True
"""

try:
    import starlette  # noqa: F401 - fail early, with the extra to install
except ImportError as exc:  # pragma: no cover - exercised with the extra uninstalled
    from tidemill.errors import MissingDependencyError

    raise MissingDependencyError(
        "starlette", extra="proxy", feature="The OpenAI-compatible proxy"
    ) from exc

from tidemill.llm.proxy._access import AccessRecord, track
from tidemill.llm.proxy._app import (
    DEFAULT_KEEPALIVE,
    DEFAULT_READ_TIMEOUT,
    MAX_BODY_BYTES,
    Routing,
    create_app,
)
from tidemill.llm.proxy._chunks import DONE, ChunkEncoder, error_event
from tidemill.llm.proxy._errors import InvalidRequest, ProxyError, UnknownModel, proxy_error
from tidemill.llm.proxy._files import FilePolicy
from tidemill.llm.proxy._request import (
    ChatCompletionRequest,
    check_fields,
    parse_chat_request,
    parse_json,
)
from tidemill.llm.proxy._response import completion_body, usage_body
from tidemill.llm.proxy._router import DEFAULT_MAX_MODELS, MAX_MODEL_NAME, ModelRouter
from tidemill.llm.proxy._streaming import KEEPALIVE, EventStreamResponse

__all__ = [
    "DEFAULT_KEEPALIVE",
    "DEFAULT_MAX_MODELS",
    "DEFAULT_READ_TIMEOUT",
    "DONE",
    "KEEPALIVE",
    "MAX_BODY_BYTES",
    "MAX_MODEL_NAME",
    "AccessRecord",
    "ChatCompletionRequest",
    "ChunkEncoder",
    "EventStreamResponse",
    "FilePolicy",
    "InvalidRequest",
    "ModelRouter",
    "ProxyError",
    "Routing",
    "UnknownModel",
    "check_fields",
    "completion_body",
    "create_app",
    "error_event",
    "parse_chat_request",
    "parse_json",
    "proxy_error",
    "track",
    "usage_body",
]
