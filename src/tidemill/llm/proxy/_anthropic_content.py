"""The `messages` of an Anthropic Messages API request, read into Tidemill `Message`s.

Each turn's content is a string or a list of blocks, read as the Chat
Completions path reads its messages (`_messages`): `text` blocks are joined
into the message's text; `image` blocks (a `base64` source with its
`media_type`, or a `url` source) become `ImageRef`s, by reference; an
assistant's `tool_use` blocks become its `ToolCall`s, with their ids; a user's
`tool_result` blocks become tool messages, named after the call they answer,
which must be one of an earlier assistant turn. A user turn is read as its
tool results first (they answer the turn before it), then one user message
with the rest of its text and images, and the images of its tool results: no
upstream takes images inside a tool result, every one takes them from a user.

What the proxy cannot carry (documents, thinking, server tools' blocks) is
refused with an `InvalidRequest` naming the field, never dropped; so is a
malformed block, an image of a type Anthropic does not take or whose data is
not base64, and a stored file the operator did not allow (`FilePolicy`).
A block's `cache_control` is a caching hint, and is not forwarded.
"""

from __future__ import annotations

import binascii
from base64 import b64decode
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import cast

from pydantic import JsonValue

from tidemill.llm.proxy._errors import InvalidRequest
from tidemill.llm.proxy._files import FilePolicy
from tidemill.llm.proxy._messages import _image, _parts, _string, wrong_type
from tidemill.types import ImageRef, Message, Role, ToolCall

__all__ = ["MEDIA_TYPES", "TurnReader", "system_text"]

MEDIA_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
"""The image types Anthropic's API takes."""

_Block = dict[str, object]


def system_text(value: object) -> str:
    """The `system` prompt: a string, or a list of text blocks, joined.

    Raises:
        InvalidRequest: Naming the block that is not text.
    """
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        raise wrong_type("system", "a string or an array of text blocks", value)
    texts: list[str] = []
    for where, block in _blocks(value, "system"):
        if block["type"] != "text":
            raise _not_here(block["type"], where, "the system prompt takes 'text' blocks only")
        texts.append(_string(block.get("text"), f"{where}.text"))
    return "".join(texts)


@dataclass
class TurnReader:
    """Reads the turns of one conversation in order, pairing tool results with their calls.

    Args:
        files: Which image URLs may be passed upstream.
    """

    files: FilePolicy = field(default_factory=FilePolicy)
    names: dict[str, str] = field(default_factory=dict)
    """The tool of each `tool_use` id met so far."""

    def turn(self, turn: object, param: str) -> list[Message]:
        """The messages of one turn, `param` naming it (`messages[2]`).

        Raises:
            InvalidRequest: Naming the first field that cannot be read.
        """
        if not isinstance(turn, dict):
            raise wrong_type(param, "a message object", turn)
        role = turn.get("role")
        content = turn.get("content")
        where = f"{param}.content"
        if role == "assistant":
            return [self._assistant(content, where)]
        if role != "user":
            raise InvalidRequest(
                f"Invalid value for '{param}.role': {role!r}. Supported roles are 'user' and "
                "'assistant'; send the system prompt as the top-level 'system'.",
                param=f"{param}.role",
            )
        if isinstance(content, str):
            return [Message.user(content)]
        if not isinstance(content, list):
            raise wrong_type(where, "a string or an array of content blocks", content)
        return self._user(content, where)

    def _user(self, content: list[object], param: str) -> list[Message]:
        results: list[Message] = []
        texts: list[str] = []
        images: list[ImageRef] = []
        for where, block in _blocks(content, param):
            kind = block["type"]
            if kind == "text":
                texts.append(_string(block.get("text"), f"{where}.text"))
            elif kind == "image":
                images.append(self._image(block, where))
            elif kind == "tool_result":
                results.append(self._tool_result(block, where, images))
            else:
                raise _not_here(kind, where, "a user turn takes 'text', 'image' and 'tool_result'")
        if texts or images or not results:
            results.append(Message.user("".join(texts), images=tuple(images)))
        return results

    def _assistant(self, content: object, param: str) -> Message:
        if isinstance(content, str):
            return Message.assistant(content)
        if not isinstance(content, list):
            raise wrong_type(param, "a string or an array of content blocks", content)
        texts: list[str] = []
        calls: list[ToolCall] = []
        for where, block in _blocks(content, param):
            kind = block["type"]
            if kind == "text":
                texts.append(_string(block.get("text"), f"{where}.text"))
            elif kind == "tool_use":
                calls.append(self._tool_use(block, where))
            else:
                raise _not_here(kind, where, "an assistant turn takes 'text' and 'tool_use'")
        return Message.assistant("".join(texts), tool_calls=tuple(calls))

    def _tool_use(self, block: _Block, param: str) -> ToolCall:
        call_id = _name(block, "id", param)
        if call_id in self.names:
            raise InvalidRequest(
                f"'{param}.id': the tool_use id {call_id!r} is used twice in the conversation; "
                "each tool_use needs an id of its own.",
                param=f"{param}.id",
            )
        name = _name(block, "name", param)
        arguments = block.get("input", {})
        if not isinstance(arguments, dict):
            raise wrong_type(f"{param}.input", "an object", arguments)
        self.names[call_id] = name
        return ToolCall(id=call_id, name=name, arguments=cast(dict[str, JsonValue], arguments))

    def _tool_result(self, block: _Block, param: str, images: list[ImageRef]) -> Message:
        call_id = _name(block, "tool_use_id", param)
        if call_id not in self.names:
            raise InvalidRequest(
                f"'{param}.tool_use_id': {call_id!r} answers no tool_use of an earlier "
                "assistant turn in 'messages'.",
                param=f"{param}.tool_use_id",
            )
        is_error = block.get("is_error")
        if is_error is not None and not isinstance(is_error, bool):
            raise wrong_type(f"{param}.is_error", "a boolean", is_error)
        content = block.get("content")
        where = f"{param}.content"
        text = ""
        if isinstance(content, str):
            text = content
        elif isinstance(content, list):
            texts: list[str] = []
            for inner, part in _blocks(content, where):
                if part["type"] == "text":
                    texts.append(_string(part.get("text"), f"{inner}.text"))
                elif part["type"] == "image":
                    images.append(self._image(part, inner))
                else:
                    raise _not_here(part["type"], inner, "a tool result takes 'text' and 'image'")
            text = "".join(texts)
        elif content is not None:
            raise wrong_type(where, "a string or an array of content blocks", content)
        return Message(
            role=Role.TOOL,
            content=text,
            tool_call_id=call_id,
            name=self.names[call_id],
            is_error=bool(is_error),
        )

    def _image(self, block: _Block, param: str) -> ImageRef:
        source = block.get("source")
        where = f"{param}.source"
        if not isinstance(source, dict):
            raise wrong_type(where, "an image source object", source)
        kind = source.get("type")
        if kind == "base64":
            media_type = source.get("media_type")
            if media_type not in MEDIA_TYPES:
                raise InvalidRequest(
                    f"Invalid value for '{where}.media_type': {media_type!r}. Supported image "
                    f"types are {', '.join(repr(t) for t in MEDIA_TYPES)}.",
                    param=f"{where}.media_type",
                )
            data = source.get("data")
            if not isinstance(data, str) or not data:
                raise wrong_type(f"{where}.data", "a non-empty base64 string", data)
            try:
                b64decode(data, validate=True)
            except (binascii.Error, ValueError):
                raise InvalidRequest(
                    f"'{where}.data' is not valid base64.", param=f"{where}.data"
                ) from None
            return _image({"url": f"data:{media_type};base64,{data}"}, where)
        if kind == "url":
            url = source.get("url")
            if not isinstance(url, str) or not url:
                raise wrong_type(f"{where}.url", "a non-empty string", url)
            reason = self.files.refusal(url)
            if reason is not None:
                raise InvalidRequest(
                    f"'{where}.url' {reason}. Send the image inline, as a base64 source, or at "
                    "a public https URL; the proxy's operator can allow a bucket "
                    "(--allow-file-prefix).",
                    param=f"{where}.url",
                    code="invalid_image_url",
                )
            return _image({"url": url}, where)
        raise InvalidRequest(
            f"Invalid value for '{where}.type': {kind!r}. This proxy takes 'base64' and 'url' "
            "image sources.",
            param=f"{where}.type",
        )


def _blocks(content: list[object], param: str) -> Iterator[tuple[str, _Block]]:
    return _parts(content, param, "content block")


def _not_here(kind: object, param: str, what: str) -> InvalidRequest:
    unserved = {
        "document": "Documents are not served by this proxy's Messages endpoint.",
        "thinking": "Thinking is not served by this proxy's Messages endpoint.",
        "redacted_thinking": "Thinking is not served by this proxy's Messages endpoint.",
    }.get(str(kind), f"Content block type {kind!r} is not supported here.")
    return InvalidRequest(
        f"'{param}': {unserved} {what[0].upper()}{what[1:]}.", param=f"{param}.type"
    )


def _name(block: _Block, key: str, param: str) -> str:
    value = block.get(key)
    if not isinstance(value, str) or not value:
        raise wrong_type(f"{param}.{key}", "a non-empty string", value)
    return value
