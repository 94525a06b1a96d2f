"""Strict structural validation of Kubernetes objects against an API schema.

The schema files (k8s_schema.json, generated from the Kubernetes OpenAPI definitions by
generate_k8s_schema.mjs; lws_schema.json for the LeaderWorkerSet CRD) map
"apiVersion/kind" to a definition; definitions are a JSON-schema subset: type
(object, array, string, integer, number, boolean, or a list of them), properties,
required, additionalProperties (maps), items, enum, format int32 and $ref.

Strict like `kubeconform -strict`: an unknown field is an error (a misspelt
`podManagmentPolicy` must not pass silently), and so are a missing required field, a
wrong type, a value outside an enum, a non-integer or out-of-range int32, and null.
"""

import json
from typing import Any, Dict, List

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


class SchemaSet:
    """Definitions and the apiVersion/kind -> definition table of one or more files."""

    def __init__(self, paths: List[str]):
        self.definitions: Dict[str, dict] = {}
        self.kinds: Dict[str, str] = {}
        for path in paths:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
            self.definitions.update(data["definitions"])
            self.kinds.update(data["kinds"])
        for name, schema in self.definitions.items():
            for ref in _refs(schema):
                if ref not in self.definitions:
                    raise ValueError(f"schema: definition {name} refers to unknown {ref}")

    def validate(self, obj: Any, where: str = "") -> List[str]:
        """Errors of one manifest object, each "WHERE: PATH: message"; [] when valid."""
        prefix = f"{where}: " if where else ""
        if not isinstance(obj, dict):
            return [f"{prefix}not an object"]
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        name = (obj.get("metadata") or {}).get("name", "?")
        key = f"{api_version}/{kind}"
        label = f"{prefix}{kind}/{name}"
        if key not in self.kinds:
            return [f"{label}: no schema for apiVersion/kind {key}"]
        errors: List[str] = []
        self._check(obj, {"$ref": self.kinds[key]}, "", errors)
        return [f"{label}: {e}" for e in errors]

    def _check(self, value: Any, schema: dict, path: str, errors: List[str]) -> None:
        while "$ref" in schema:
            schema = self.definitions[schema["$ref"]]
        shown = path or "/"
        if value is None:
            errors.append(f"{shown}: null is not allowed")
            return
        if "enum" in schema and value not in schema["enum"]:
            errors.append(f"{shown}: {value!r} is not one of {schema['enum']}")
            return
        types = schema.get("type")
        if types is not None:
            allowed = types if isinstance(types, list) else [types]
            if not any(_is_type(value, t) for t in allowed):
                errors.append(f"{shown}: expected {' or '.join(allowed)}, got {_type_name(value)}")
                return
        if schema.get("format") == "int32" and _is_type(value, "integer"):
            if not INT32_MIN <= value <= INT32_MAX:
                errors.append(f"{shown}: {value} does not fit in int32")
        if isinstance(value, dict):
            self._check_object(value, schema, path, errors)
        elif isinstance(value, list) and "items" in schema:
            for i, item in enumerate(value):
                self._check(item, schema["items"], f"{path}/{i}", errors)

    def _check_object(self, value: dict, schema: dict, path: str, errors: List[str]) -> None:
        properties = schema.get("properties")
        additional = schema.get("additionalProperties")
        for field in schema.get("required", []):
            if field not in value:
                errors.append(f"{path or '/'}: missing required field {field!r}")
        for field, item in value.items():
            child = f"{path}/{field}"
            if properties is not None and field in properties:
                self._check(item, properties[field], child, errors)
            elif additional is not None:
                self._check(item, additional, child, errors)
            elif properties is not None:
                errors.append(f"{child}: unknown field (known: {', '.join(sorted(properties))})")
            # No properties and no additionalProperties: free-form object.


def _is_type(value: Any, t: str) -> bool:
    if t == "object":
        return isinstance(value, dict)
    if t == "array":
        return isinstance(value, list)
    if t == "string":
        return isinstance(value, str)
    if t == "boolean":
        return isinstance(value, bool)
    if t == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if t == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    raise ValueError(f"schema: unknown type {t!r}")


def _type_name(value: Any) -> str:
    for t in ("boolean", "integer", "number", "string", "array", "object"):
        if _is_type(value, t):
            return t
    return type(value).__name__


def _refs(schema: Any):
    if isinstance(schema, dict):
        for k, v in schema.items():
            if k == "$ref":
                yield v
            else:
                yield from _refs(v)
    elif isinstance(schema, list):
        for v in schema:
            yield from _refs(v)
