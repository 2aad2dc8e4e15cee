"""JSON Schema 2020-12 for generated tools, valid for every official client.

DRF maps serializer fields to OpenAPI 3.0, which is close to JSON Schema but not the same:
``nullable``, Python regular expressions (DRF even writes ``\\Z`` as ``\\z``, valid in neither
Python nor ECMA-262), decimals as strings with a float ``multipleOf`` and off-by-a-cent bounds.
MCP clients validate with JSON Schema, compiling patterns with an ECMA-262 engine (Ajv in the
TypeScript SDK and the Inspector) or with Python's ``re`` (python-jsonschema in the Python
SDK), so :class:`FieldSchemas` keeps DRF's mapping and corrects those parts, and
:func:`ecma_patterns` cleans any schema (pydantic's too) of patterns one of them would refuse
or read differently. docs/schemas.md says what each field becomes.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterable
from decimal import Decimal
from typing import Any, cast

from django.conf import settings
from django.core.validators import (
    DecimalValidator,
    EmailValidator,
    MaxLengthValidator,
    MaxValueValidator,
    MinLengthValidator,
    MinValueValidator,
    RegexValidator,
    URLValidator,
)
from django.db import models
from django.utils.translation import gettext_lazy as _
from jsonschema import ValidationError
from referencing import Registry
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012
from rest_framework import ISO_8601, serializers
from rest_framework.schemas.openapi import AutoSchema
from rest_framework.settings import api_settings

from ..protocol.ecma import ecma_pattern

# Keys whose value is a schema, a list of schemas, or a name → schema mapping.
_SCHEMA_KEYS = (
    "items",
    "additionalProperties",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
)
_SCHEMA_LISTS = ("anyOf", "allOf", "oneOf", "prefixItems")
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
# Annotations stay beside an ``anyOf`` when a schema becomes nullable; the rest moves inside.
_ANNOTATIONS = (
    "title",
    "description",
    "default",
    "examples",
    "readOnly",
    "writeOnly",
    "deprecated",
)


def ecma_patterns(schema: Any) -> Any:
    """A copy of ``schema`` with every ``pattern`` made ECMA-262 (or dropped) and every
    ``patternProperties`` key likewise; everything else unchanged."""
    if isinstance(schema, list):
        return [ecma_patterns(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    result: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "pattern" and isinstance(value, str):
            translated = ecma_pattern(value)
            if translated is not None:
                result[key] = translated
        elif key == "patternProperties" and isinstance(value, dict):
            kept = {ecma_pattern(k): ecma_patterns(v) for k, v in value.items()}
            if None in kept:
                # A key we cannot translate would match other names: allow any extra property.
                result.pop("additionalProperties", None)
                kept.pop(None)
            result[key] = kept
        elif key in _SCHEMA_MAPS and isinstance(value, dict):
            result[key] = {name: ecma_patterns(sub) for name, sub in value.items()}
        elif key in _SCHEMA_LISTS or key in _SCHEMA_KEYS:
            result[key] = ecma_patterns(value)
        else:
            result[key] = value
    return result


def nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` or null, as ``anyOf`` (clients such as the Inspector read a ``type`` array
    poorly); annotations stay outside."""
    outer = {k: v for k, v in schema.items() if k in _ANNOTATIONS}
    inner = {k: v for k, v in schema.items() if k not in _ANNOTATIONS}
    if not inner:
        return schema  # any value already, null included
    branches = list(inner["anyOf"]) if list(inner) == ["anyOf"] else [inner]
    if {"type": "null"} not in branches:
        branches.append({"type": "null"})
    return {**outer, "anyOf": branches}


def result_schema(schema: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """A function tool's ``outputSchema`` from pydantic's schema of its return type, and whether
    its results travel wrapped as ``{"result": value}``.

    Structured content is an object, so any other value is wrapped. pydantic writes every
    ``$ref`` as ``#/$defs/Name``, against the document's root: the definitions move up to the
    wrapper's root (left under ``properties.result`` they point nowhere, and the official
    Python client refuses every call). A recursive model's schema is a bare ``$ref`` to its
    definition: that definition becomes the root, and the model is an object like any other.
    """
    schema = dict(schema)
    defs = schema.pop("$defs", None)
    ref = schema.get("$ref")
    if (
        isinstance(ref, str)
        and ref.startswith("#/$defs/")
        and isinstance(defs, dict)
        and set(schema) <= {"$ref", *_ANNOTATIONS}
    ):
        target = defs.get(ref.removeprefix("#/$defs/"))
        if isinstance(target, dict) and target.get("type") == "object":
            schema = {**target, **{key: value for key, value in schema.items() if key != "$ref"}}
    wrapped = schema.get("type") != "object"
    if wrapped:
        schema = {"type": "object", "properties": {"result": schema}, "required": ["result"]}
    else:
        schema.pop("title", None)
    if defs:
        schema["$defs"] = defs
    return schema, wrapped


def unresolvable_refs(schema: dict[str, Any]) -> list[str]:
    """Each ``$ref`` of ``schema`` that does not resolve inside it, as the official Python client
    resolves them (an empty registry: no network, MCP forbids fetching a ``$ref``); nested
    ``$id``s taken into account."""
    problems: list[str] = []

    def walk(node: Any, resolver: Any) -> None:
        if isinstance(node, list):
            for item in node:
                walk(item, resolver)
            return
        if not isinstance(node, dict):
            return
        if isinstance(node.get("$id"), str):
            resolver = resolver.in_subresource(DRAFT202012.create_resource(node))
        ref = node.get("$ref")
        if isinstance(ref, str):
            try:
                resolver.lookup(ref)
            except Unresolvable:
                problems.append(ref)
        for key, value in node.items():
            if key in _SCHEMA_MAPS and isinstance(value, dict):
                for sub in value.values():
                    walk(sub, resolver)
            elif key in _SCHEMA_KEYS or key in _SCHEMA_LISTS:
                walk(value, resolver)

    walk(schema, Registry().resolver_with_root(DRAFT202012.create_resource(schema)))
    return problems


def _json_number(value: Any) -> int | float | None:
    """A validator's limit as a JSON number, or None (dates, callables, anything else)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, (float, Decimal)):
        return int(value) if value == int(value) else float(value)
    return None


def decimal_bound(max_digits: int | None, decimal_places: int | None) -> Decimal | None:
    """The largest value ``max_digits`` / ``decimal_places`` allow: 8, 2 → 999999.99."""
    if max_digits is None:
        return None
    places = decimal_places or 0
    return Decimal(10) ** (max_digits - places) - Decimal(10) ** -places


def decimal_string_pattern(max_digits: int | None, decimal_places: int | None) -> str:
    """An ECMA-262 pattern for a decimal written as a string, with at most the allowed digits."""
    whole = "*" if max_digits is None else f"{{0,{max(max_digits - (decimal_places or 0), 0)}}}"
    places = "*" if decimal_places is None else f"{{0,{decimal_places}}}"
    fraction = "" if decimal_places == 0 else rf"(?:\.\d{places})?"
    # At least one digit, before or after the point.
    return rf"^-?(?=\.?\d)\d{whole}{fraction}$"


def decimal_description(
    low: Decimal | None, high: Decimal | None, decimal_places: int | None
) -> str:
    """What a decimal input takes, in words: the schema cannot say "at most 2 places" of a
    JSON number without a float ``multipleOf``, which clients compute inexactly."""
    if low is not None and high is not None:
        span = f" from {low:f} to {high:f}"
    elif low is not None:
        span = f" of at least {low:f}"
    elif high is not None:
        span = f" of at most {high:f}"
    else:
        span = ""
    places = "any number of" if decimal_places is None else f"at most {decimal_places}"
    return f"A decimal number{span} with {places} decimal places, as a JSON number or a string."


class FieldSchemas(AutoSchema):  # type: ignore[misc]  # DRF ships no type information
    """DRF's serializer mapping, as JSON Schema 2020-12 that MCP clients accept.

    ``output=True`` describes what the serializer writes (decimals as strings when DRF coerces
    them), otherwise what it reads (decimals as a JSON number or a numeric string).
    """

    def __init__(self, *, output: bool = False) -> None:
        super().__init__()
        self.output = output

    def map_field(self, field: serializers.Field) -> dict[str, Any]:
        if isinstance(field, serializers.DecimalField):
            return self.map_decimal(field)
        if isinstance(
            field,
            (serializers.JSONField, serializers.ReadOnlyField, serializers.SerializerMethodField),
        ):
            return {}  # any JSON value: DRF's "object" or "string" would refuse lists and numbers
        if isinstance(field, serializers.PrimaryKeyRelatedField) and not getattr(
            field, "pk_field", None
        ):
            return self.map_related_pk(field)
        if isinstance(field, serializers.DurationField):
            # In: ISO 8601 (parse_duration takes it, and Django's own form too). Out: said only
            # where the field writes ISO 8601 (the generated serializers' ISODurationField).
            if self.output and not writes_iso_duration(field):
                return {"type": "string"}
            return {"type": "string", "format": "duration"}
        return cast(dict[str, Any], super().map_field(field))  # DRF's mapping: a schema dict

    def map_related_pk(self, field: serializers.PrimaryKeyRelatedField) -> dict[str, Any]:
        """The schema of the related model's primary key: its type and format (a UUID key is
        ``{"type": "string", "format": "uuid"}``), as for the model's own key."""
        model = getattr(field.queryset, "model", None)
        if model is None:  # read-only: the target model is not at hand
            return {"anyOf": [{"type": "integer"}, {"type": "string"}]}
        return pk_schema(model)

    def map_decimal(self, field: serializers.DecimalField) -> dict[str, Any]:
        bound = decimal_bound(field.max_digits, field.decimal_places)
        as_string = {
            "type": "string",
            "pattern": decimal_string_pattern(field.max_digits, field.decimal_places),
        }
        number: dict[str, Any] = {"type": "number"}
        low, high = (None, None) if bound is None else (-bound, bound)
        lows = [field.min_value] + [
            v.limit_value for v in field.validators if isinstance(v, MinValueValidator)
        ]
        highs = [field.max_value] + [
            v.limit_value for v in field.validators if isinstance(v, MaxValueValidator)
        ]
        for limit in lows:
            if isinstance(limit, (int, float, Decimal)):
                low = Decimal(str(limit)) if low is None else max(low, Decimal(str(limit)))
        for limit in highs:
            if isinstance(limit, (int, float, Decimal)):
                high = Decimal(str(limit)) if high is None else min(high, Decimal(str(limit)))
        if low is not None:
            number["minimum"] = _json_number(low)
        if high is not None:
            number["maximum"] = _json_number(high)
        if self.output:
            # What DRF's to_representation does: a string unless told otherwise. The string's
            # shape is DRF's (quantized to the places); bounds are validators', left out.
            return (
                as_string if getattr(field, "coerce_to_string", _coerces()) else {"type": "number"}
            )
        return {
            "anyOf": [number, as_string],
            "description": decimal_description(low, high, field.decimal_places),
        }

    def map_field_validators(self, field: serializers.Field, schema: dict[str, Any]) -> None:
        """DRF's validator mapping, with patterns made ECMA-262 (or dropped) and limits kept
        only where they are JSON numbers; decimals carry their bounds already."""
        if isinstance(field, serializers.DecimalField):
            return
        patterns = []
        for validator in field.validators:
            if isinstance(validator, EmailValidator):
                schema["format"] = "email"
            elif isinstance(validator, URLValidator):
                schema["format"] = "uri"  # its pattern is IGNORECASE: left to the format
            elif isinstance(validator, RegexValidator):
                # Compiled by the validator's __init__ (a str only on a class definition).
                regex = cast(re.Pattern[str], validator.regex)
                translated = (
                    None if validator.inverse_match else ecma_pattern(regex.pattern, regex.flags)
                )
                patterns.append(translated)
            elif isinstance(validator, MaxLengthValidator):
                schema["maxItems" if isinstance(field, serializers.ListField) else "maxLength"] = (
                    validator.limit_value
                )
            elif isinstance(validator, MinLengthValidator):
                schema["minItems" if isinstance(field, serializers.ListField) else "minLength"] = (
                    validator.limit_value
                )
            elif isinstance(validator, (MaxValueValidator, MinValueValidator)):
                limit = _json_number(validator.limit_value)
                if limit is not None and schema.get("type") in ("integer", "number"):
                    schema["maximum" if isinstance(validator, MaxValueValidator) else "minimum"] = (
                        limit
                    )
            elif isinstance(validator, DecimalValidator):
                continue
        # One pattern says it; two or more would need allOf, and one we cannot say spoils none.
        # Django runs no validator on an empty value, so a field that may be blank takes "".
        blank = "|^$" if getattr(field, "allow_blank", False) else ""
        usable = [f"(?:{p}){blank}" if blank else p for p in patterns if p is not None]
        if len(usable) == 1:
            schema["pattern"] = usable[0]
        elif len(usable) > 1:
            schema["allOf"] = [{"pattern": p} for p in usable]

    def field_schema(self, field: serializers.Field) -> dict[str, Any]:
        """One field's schema, complete: DRF's annotations, validators, and nullability.

        Output schemas say the type and leave validators and choices out: they bind what a
        client sends, not what is stored (rows saved from code or before a validator was
        added), and a client refuses the whole result when one value breaks its schema.
        """
        schema = self.map_field(field)
        if self.output:
            if isinstance(field, serializers.FileField):
                schema = {"type": "string"}  # the file's URL, or null when there is none
                field_may_be_null = True
            else:
                if not isinstance(field, (serializers.DecimalField, serializers.DurationField)):
                    schema = types_only(schema)
                field_may_be_null = field.allow_null
            if field_may_be_null:
                schema["nullable"] = True
            if field.help_text:
                schema["description"] = str(field.help_text)
            return clean(schema)
        if field.read_only:
            schema["readOnly"] = True
        if field.write_only:
            schema["writeOnly"] = True
        if field.allow_null:
            schema["nullable"] = True
        if (
            field.default is not None
            and field.default != serializers.empty
            and not callable(field.default)
        ):
            default = field.default
            if isinstance(default, (str, bool, int, float)) or default is None:
                schema["default"] = default
        if field.help_text:
            # The field's own words first; a decimal's note on places and range stays.
            schema["description"] = " ".join(
                filter(None, [str(field.help_text), schema.get("description")])
            )
        self.map_field_validators(field, schema)
        return clean(schema)


def writes_iso_duration(field: serializers.DurationField) -> bool:
    """Whether ``field`` writes ISO 8601 durations (``P1DT02H00M00S``), as DRF's ``format``
    (or ``DURATION_FORMAT``) ``"iso-8601"`` makes it."""
    output_format = getattr(field, "format", api_settings.DURATION_FORMAT)
    return isinstance(output_format, str) and output_format.lower() == ISO_8601


class ISODurationField(serializers.DurationField):  # type: ignore[misc]  # DRF ships no types
    """A duration written as ISO 8601, as its schema's ``"format": "duration"`` says; read as
    ISO 8601 or as Django's ``[DD] [HH:[MM:]]ss[.uuuuuu]``."""

    # DRF's words name only Django's form; the schema names ISO 8601.
    default_error_messages = {
        "invalid": _(
            "Duration has wrong format. Use ISO 8601 (P1DT2H30M) or [DD] [HH:[MM:]]ss[.uuuuuu]."
        ),
    }

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("format", ISO_8601)
        super().__init__(**kwargs)


def pk_json_type(model: type[models.Model]) -> str:
    """ "integer" or "string": how ``model``'s primary key travels in JSON. A one-to-one primary
    key (a profile keyed on its user) is its target's."""
    pk: Any = model._meta.pk
    while pk is not None and pk.is_relation:
        pk = pk.target_field
    return "integer" if isinstance(pk, models.IntegerField) else "string"


def pk_schema(model: type[models.Model]) -> dict[str, Any]:
    """The JSON Schema of a primary key of ``model`` as a client sends it: the type, format and
    bounds the serializer field of the key says (``{"type": "string", "format": "uuid"}`` for a
    UUIDField, ``maxLength`` for a CharField, ``integer`` for an AutoField). A one-to-one
    primary key is its target's."""
    pk: Any = model._meta.pk
    while pk.is_relation:
        pk = pk.target_field
    field_class, kwargs = serializers.ModelSerializer().build_standard_field(pk.name, pk)
    # An AutoField is read-only in a serializer, and a key is never null: only its shape counts.
    kwargs = {
        k: v
        for k, v in kwargs.items()
        if k not in ("read_only", "required", "allow_null", "default")
    }
    schema = FieldSchemas().field_schema(field_class(**kwargs))
    schema = {key: value for key, value in schema.items() if key not in _ANNOTATIONS}
    return schema if "type" in schema or "anyOf" in schema else {"type": pk_json_type(model)}


def argument_error(error: ValidationError) -> str:
    """One line of an "Invalid arguments" answer: where, and what is wrong."""
    return f"{'.'.join(map(str, error.path)) or 'arguments'}: {error_message(error)}"


def invalid_arguments(lines: Iterable[str]) -> str:
    """The text of a tool's isError answer to bad arguments: every problem, one per line."""
    return "Invalid arguments:\n" + "\n".join(lines)


def error_message(error: ValidationError) -> str:
    """jsonschema's message for ``error``, saying what was expected where it says only "is not
    valid under any of the given schemas" (decimals, nullable fields)."""
    if error.validator != "anyOf":
        return error.message
    description = error.schema.get("description") if isinstance(error.schema, dict) else None
    if isinstance(description, str) and description:
        return f"{error.instance!r} is not valid. Expected: {description}"
    # The branches' own complaints, but for "is not of type 'null'", which says nothing.
    causes = [cause.message for cause in error.context or () if cause.schema != {"type": "null"}]
    return "; ".join(dict.fromkeys(causes)) or error.message


# Keywords a stored value may break: validators and choices bind what a client sends, not
# what is in the table (rows saved from code, or before a validator was added).
_CONSTRAINTS = frozenset(
    {
        "enum",
        "const",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minLength",
        "maxLength",
        "pattern",
        "minItems",
        "maxItems",
        "uniqueItems",
    }
)


def types_only(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` without the constraints a stored value may break, and without the formats
    DRF's output does not guarantee (an email saved from code need not be one; clients such as
    the TypeScript SDK's Ajv check formats)."""
    result = {key: value for key, value in schema.items() if key not in _CONSTRAINTS}
    if result.get("format") not in _guaranteed_formats():
        result.pop("format", None)
    if isinstance(result.get("items"), dict):
        result["items"] = types_only(result["items"])
    if isinstance(result.get("anyOf"), list):
        result["anyOf"] = [
            types_only(branch) if isinstance(branch, dict) else branch for branch in result["anyOf"]
        ]
    return result


def _guaranteed_formats() -> tuple[str, ...]:
    """Formats DRF's output always meets: dates and UUIDs; date-times when aware (a naive one
    has no offset, which RFC 3339 requires)."""
    return ("date", "uuid", "date-time") if settings.USE_TZ else ("date", "uuid")


def _coerces() -> bool:
    return bool(api_settings.COERCE_DECIMAL_TO_STRING)


def clean(schema: dict[str, Any]) -> dict[str, Any]:
    """OpenAPI 3.0 leftovers out, JSON Schema 2020-12 in: ``nullable`` → ``anyOf`` with null,
    integer ``format``s dropped, array items cleaned too."""
    schema = {
        key: _json_values(value) if key in ("enum", "default", "const") else value
        for key, value in schema.items()
    }
    is_nullable = schema.pop("nullable", False)
    if schema.get("format") in ("int64", "int32"):
        schema.pop("format")
    if isinstance(schema.get("items"), dict):
        schema["items"] = clean(schema["items"])
    return nullable(schema) if is_nullable else schema


def serializer_schema(
    serializer: serializers.Serializer, *, writable: bool, output: bool = False
) -> dict[str, Any]:
    """``{"type": "object", "properties": ..., "required": ...}`` for a serializer's fields
    (only those a client may write when ``writable``)."""
    mapper = FieldSchemas(output=output)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, field in serializer.fields.items():
        if writable and field.read_only:
            continue
        if not writable and field.write_only:
            continue
        properties[name] = mapper.field_schema(field)
        if writable and field.required:
            required.append(name)
    return {"type": "object", "properties": properties, "required": required}


def _json_values(value: Any) -> Any:
    """Choices and defaults as JSON values (a decimal or a date would not serialize)."""
    if isinstance(value, list):
        return [_json_values(v) for v in value]
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, Decimal):
        return _json_number(value)
    return value
