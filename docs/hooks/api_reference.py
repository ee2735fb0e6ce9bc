"""The HTTP API reference page, written from the checked-in `openapi.json` at build time.

`openapi.json` is what `el serve` publishes at `/openapi.json` (a test keeps the two equal), so the
page is derived from the routes themselves: a table of every operation, then each operation with
its parameters, body and answers, then every schema they name. It needs no viewer and no network.
"""

import json
from typing import Any

from markdown_text import cell

METHODS = ("get", "post", "put", "patch", "delete")

Schema = dict[str, Any]


def api_markdown(document: Schema) -> str:
    info = document["info"]
    operations = [
        (path, method, operation)
        for path, item in document["paths"].items()
        for method, operation in item.items()
        if method in METHODS
    ]
    lines = [
        "# HTTP API reference",
        "",
        "<!-- Generated from openapi.json when the site is built; edit the routes in src/envloop/api, "
        "then regenerate openapi.json, not this page. -->",
        "",
        f"{info['title']} {info['version']}, OpenAPI {document['openapi']}. `el serve` publishes the same "
        "document at `/openapi.json`.",
        "",
        info.get("description", "").strip(),
        "",
        "| operation | what it does |",
        "|---|---|",
    ]
    lines += [
        f"| [`{method.upper()} {path}`](#{_operation_anchor(operation)}) | {cell(_summary(operation))} |"
        for path, method, operation in operations
    ]
    tags = list(dict.fromkeys(tag for _, _, operation in operations for tag in operation.get("tags", [])))
    for tag in tags:
        lines += ["", f"## {tag.capitalize()}"]
        for path, method, operation in operations:
            if tag in operation.get("tags", [])[:1]:
                lines += ["", *_operation(path, method, operation)]
    lines += ["", "## Schemas", "", "Every request and answer body named above, field by field."]
    for name, schema in sorted(document.get("components", {}).get("schemas", {}).items()):
        lines += ["", *_schema_section(name, schema)]
    return "\n".join(lines) + "\n"


def _operation(path: str, method: str, operation: Schema) -> list[str]:
    lines = [
        f"### {operation.get('summary', path)} {{ #{_operation_anchor(operation)} }}",
        "",
        f"`{method.upper()} {path}`",
        "",
    ]
    if description := operation.get("description", "").strip():
        lines += [description, ""]
    parameters = operation.get("parameters", [])
    if parameters:
        lines += ["| parameter | in | type | required | meaning |", "|---|---|---|---|---|"]
        for parameter in parameters:
            schema = parameter.get("schema", {})
            meaning = parameter.get("description") or schema.get("description", "")
            if "default" in schema:
                meaning = f"{meaning} (default `{json.dumps(schema['default'])}`)".strip()
            required = "yes" if parameter.get("required") else "no"
            name, where = parameter["name"], parameter["in"]
            lines.append(f"| `{name}` | {where} | {_type(schema)} | {required} | {cell(meaning)} |")
        lines.append("")
    if body := operation.get("requestBody"):
        media = ", ".join(
            f"`{kind}` {_type(content.get('schema', {}))}" for kind, content in body["content"].items()
        )
        lines += [f"Body: {media}.", ""]
    lines += ["| answer | meaning | body |", "|---|---|---|"]
    for status, response in operation.get("responses", {}).items():
        bodies = ", ".join(
            _type(content.get("schema", {})) for content in response.get("content", {}).values()
        )
        lines.append(f"| {status} | {cell(response.get('description', ''))} | {bodies} |")
    return lines


def _schema_section(name: str, schema: Schema) -> list[str]:
    lines = [f"### {name} {{ #{_schema_anchor(name)} }}", ""]
    if description := schema.get("description", "").strip():
        lines += [cell(description), ""]
    if "enum" in schema:
        return [*lines, "One of " + ", ".join(f"`{value}`" for value in schema["enum"]) + "."]
    properties: Schema = schema.get("properties", {})
    if not properties:
        return [*lines, f"Type: {_type(schema)}."]
    required = set(schema.get("required", []))
    lines += ["| field | type | required | meaning |", "|---|---|---|---|"]
    for field, spec in properties.items():
        meaning = spec.get("description", "")
        if "default" in spec and spec["default"] not in (None, [], {}):
            meaning = f"{meaning} (default `{json.dumps(spec['default'])}`)".strip()
        lines.append(
            f"| `{field}` | {_type(spec)} | {'yes' if field in required else 'no'} | {cell(meaning)} |"
        )
    return lines


def _type(schema: Schema) -> str:
    """A JSON schema as a short phrase: `string or null`, `list of [Job](#schema-job)`, …"""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{_schema_anchor(name)})"
    for combinator in ("anyOf", "oneOf", "allOf"):
        if combinator in schema:
            return " or ".join(_type(option) for option in schema[combinator])
    if "enum" in schema:
        return " \\| ".join(f"`{value}`" for value in schema["enum"])
    if "const" in schema:
        return f"`{schema['const']}`"
    kind = schema.get("type")
    if kind == "array":
        return f"list of {_type(schema.get('items', {}))}"
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        return f"map of {_type(schema['additionalProperties'])}"
    if isinstance(kind, list):
        return " or ".join(kind)
    return kind or "any"


def _summary(operation: Schema) -> str:
    description = str(operation.get("description", "")).strip()
    return description.split("\n\n")[0] if description else str(operation.get("summary", ""))


def _operation_anchor(operation: Schema) -> str:
    return "op-" + str(operation["operationId"]).replace("_", "-")


def _schema_anchor(name: str) -> str:
    return "schema-" + name.lower()
