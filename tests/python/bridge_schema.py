"""A validator of the JSON Schema keywords python/dwdeconv_rewrite/runtimes/bridge.schema.json uses (type, const,
enum, properties, required, additionalProperties: false, items, minItems, minimum, exclusiveMinimum, oneOf and a local
$ref), for the tests of the protocol between the binary and the Python runtimes. A keyword it does not know is a
problem, so the schema cannot grow one this check would silently skip; tests/runtime_check/bridge_schema_validator.h
holds the same rules in C++. Standard library only."""
import json
from pathlib import Path

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "python" / "dwdeconv_rewrite" / "runtimes" / "bridge.schema.json"
_KNOWN = {"type", "const", "enum", "properties", "required", "additionalProperties", "items", "minItems", "minimum",
          "exclusiveMinimum", "oneOf", "$ref", "description", "title"}


def _is_type(value, kind):
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    return {"object": isinstance(value, dict), "array": isinstance(value, list), "string": isinstance(value, str),
            "number": number, "integer": number and float(value).is_integer(), "boolean": isinstance(value, bool),
            "null": value is None}[kind]


class Validator:
    """Validates instances against the definitions ($defs) of the schema file at `path`."""

    def __init__(self, path=SCHEMA_PATH):
        self.root = json.loads(Path(path).read_text(encoding="utf-8"))

    def problems(self, instance, definition):
        """The problems of `instance` against $defs/`definition`, each with its JSON path; empty when it is valid."""
        out = []
        self._check(instance, self.root["$defs"][definition], "$", out)
        return out

    def _check(self, value, schema, at, out):
        out += ["%s: the schema uses '%s', which this validator does not check" % (at, k) for k in schema if k not in _KNOWN]
        if "$ref" in schema:
            ref = schema["$ref"]
            if not ref.startswith("#/$defs/"):
                raise ValueError("unsupported $ref " + ref)
            return self._check(value, self.root["$defs"][ref[len("#/$defs/"):]], at, out)
        if "type" in schema and not _is_type(value, schema["type"]):
            out.append("%s: not of type %s" % (at, schema["type"]))
            return None
        if "const" in schema and (value != schema["const"] or type(value) is not type(schema["const"])):
            out.append("%s: not %r" % (at, schema["const"]))
        if "enum" in schema and value not in schema["enum"]:
            out.append("%s: not one of %s" % (at, schema["enum"]))
        if _is_type(value, "number"):
            if "minimum" in schema and value < schema["minimum"]:
                out.append("%s: below the minimum" % at)
            if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
                out.append("%s: not above the exclusive minimum" % at)
        if isinstance(value, list):
            if "minItems" in schema and len(value) < schema["minItems"]:
                out.append("%s: too few items" % at)
            for k, item in enumerate(value if "items" in schema else []):
                self._check(item, schema["items"], "%s[%d]" % (at, k), out)
        if isinstance(value, dict):
            properties = schema.get("properties", {})
            out += ["%s: lacks '%s'" % (at, key) for key in schema.get("required", []) if key not in value]
            for key, item in value.items():
                if key in properties:
                    self._check(item, properties[key], "%s.%s" % (at, key), out)
                elif schema.get("additionalProperties") is False:
                    out.append("%s: '%s' is not a property of the schema" % (at, key))
        if "oneOf" in schema:
            matched = sum(1 for option in schema["oneOf"] if not self._collect(value, option, at))
            if matched != 1:
                out.append("%s: matches %d of oneOf's schemas, not exactly one" % (at, matched))
        return None

    def _collect(self, value, schema, at):
        inner = []
        self._check(value, schema, at, inner)
        return inner
