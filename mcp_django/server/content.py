"""Small helpers for what tools, resources and prompts return: text, images, audio, resources."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

import orjson


def _b64(data: bytes | str) -> str:
    return data if isinstance(data, str) else base64.b64encode(data).decode("ascii")


@dataclass(slots=True)
class Text:
    """A text content block."""

    text: str

    def to_content(self) -> dict[str, Any]:
        return {"type": "text", "text": self.text}


@dataclass(slots=True)
class Image:
    """An image content block; ``data`` is raw bytes (or already base64 text)."""

    data: bytes | str
    mime_type: str = "image/png"

    def to_content(self) -> dict[str, Any]:
        return {"type": "image", "data": _b64(self.data), "mimeType": self.mime_type}


@dataclass(slots=True)
class Audio:
    """An audio content block; ``data`` is raw bytes (or already base64 text)."""

    data: bytes | str
    mime_type: str = "audio/wav"

    def to_content(self) -> dict[str, Any]:
        return {"type": "audio", "data": _b64(self.data), "mimeType": self.mime_type}


@dataclass(slots=True)
class EmbeddedResource:
    """A resource embedded in a result: give ``text`` or ``blob`` (bytes)."""

    uri: str
    text: str | None = None
    blob: bytes | None = None
    mime_type: str | None = None

    def contents(self) -> dict[str, Any]:
        item: dict[str, Any] = {"uri": self.uri}
        if self.mime_type:
            item["mimeType"] = self.mime_type
        if self.blob is not None:
            item["blob"] = _b64(self.blob)
        else:
            item["text"] = self.text or ""
        return item

    def to_content(self) -> dict[str, Any]:
        return {"type": "resource", "resource": self.contents()}


@dataclass(slots=True)
class ResourceLink:
    """A link to a resource the client may read later."""

    uri: str
    name: str
    description: str | None = None
    mime_type: str | None = None

    def to_content(self) -> dict[str, Any]:
        item: dict[str, Any] = {"type": "resource_link", "uri": self.uri, "name": self.name}
        if self.description:
            item["description"] = self.description
        if self.mime_type:
            item["mimeType"] = self.mime_type
        return item


ContentBlock = Text | Image | Audio | EmbeddedResource | ResourceLink
CONTENT_TYPES = (Text, Image, Audio, EmbeddedResource, ResourceLink)


@dataclass(slots=True)
class ToolResult:
    """A tool's full answer, when plain return values are not enough (e.g. ``is_error``)."""

    content: list[ContentBlock | str] = field(default_factory=list)
    structured: dict[str, Any] | None = None
    is_error: bool = False

    def to_result(self) -> dict[str, Any]:
        result: dict[str, Any] = {"content": [to_content_block(c) for c in self.content]}
        if self.structured is not None:
            result["structuredContent"] = self.structured
        if self.is_error:
            result["isError"] = True
        return result


@dataclass(slots=True)
class Message:
    """A prompt message: ``role`` is "user" or "assistant"; content is text or a content block."""

    content: ContentBlock | str
    role: str = "user"

    def to_message(self) -> dict[str, Any]:
        return {"role": self.role, "content": to_content_block(self.content)}


def to_content_block(value: Any) -> dict[str, Any]:
    """Turn a helper, a string or a ready dict into one content block."""
    if isinstance(value, CONTENT_TYPES):
        return value.to_content()
    if isinstance(value, str):
        return {"type": "text", "text": value}
    if isinstance(value, dict) and "type" in value:
        return value
    return {"type": "text", "text": orjson.dumps(value, default=str).decode()}
