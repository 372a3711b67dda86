"""A Python value written as the Java or JavaScript source text BFCL's simple_java / simple_javascript rows expect.

    source({"limit": 50, "schemaFilter": "public"}, {"type": "HashMap"}, "java")
    == 'new HashMap<String, Object>() {{ put("limit", 50); put("schemaFilter", "public"); }}'
    source(True, {"type": "Boolean"}, "javascript") == "true"
    source(["completed", "failed"], {"type": "array", "items": {"type": "String"}}, "javascript")
    == '["completed", "failed"]'

In those categories every argument is a string of source code (the model is offered each parameter as a string,
"This is Java boolean type parameter in string representation."), and bfcl-eval's checker reads it back with its
own type converters (``java_type_converter`` / ``js_type_converter``) before comparing it with the possible
answer, which holds Python values. This module writes the text those converters read back as the value: the
inverse of the converters, type by type, as the parameter's documented type names it. Strings are written as the
converters read them: bare for Java's ``String`` / ``any``, JavaScript's ``any``, and as elements of a Java
array or of an ArrayList of other items than String / char (the converters keep that text as it is); in double
quotes for JavaScript's ``String``, in a Java ArrayList of String / char, a HashMap, and JavaScript arrays and
objects (whose parsers strip them). A string where another type
is documented (BFCL's possible answers give a variable's or a constant's name for some typed parameters) is
written bare, as the text it is.

:mod:`agentrl_bfcl.answers` writes demonstrations with it, and the fidelity test its ground-truth outputs; the
checker, not this module, decides whether they pass.
"""

from __future__ import annotations

from typing import Any


# BFCL's type names as Java writes an array's element type and a collection's (boxed) type argument
_JAVA_ELEMENT = {"integer": "int", "any": "Object"}
_JAVA_BOXED = {"integer": "Integer", "long": "Long", "short": "Short", "byte": "Byte", "boolean": "Boolean",
               "double": "Double", "float": "Float", "char": "Character", "any": "Object"}


def _quoted(text: str) -> str:
    """In double quotes, not escaped: the converters strip the quotes and read what is between them as it is."""
    return f'"{text}"'


def _java_scalar(value: Any) -> str:
    """A value inside a Java collection: as bfcl-eval's ``parse_java_value`` reads it back."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return _quoted(value) if isinstance(value, str) else str(value)


def _java(value: Any, kind: str, item_kind: str | None) -> str:
    if isinstance(value, str):
        return value
    if kind == "boolean" and isinstance(value, bool):
        return "true" if value else "false"
    if kind == "long" and isinstance(value, int):
        return f"{value}L"
    if kind == "float" and isinstance(value, (int, float)):
        return f"{float(value)!r}f"
    if kind in ("double", "integer", "short", "byte") and isinstance(value, (int, float)):
        return repr(value)
    if kind == "Array" and isinstance(value, list):
        # each element read by java_type_converter(element, item type): strings stay as written, so bare
        elements = ", ".join(_java(v, item_kind or "any", None) if item_kind else _java_scalar(v) for v in value)
        return f"new {_JAVA_ELEMENT.get(item_kind or 'any', item_kind)}[]{{{elements}}}"
    if kind == "ArrayList" and isinstance(value, list):
        boxed = _JAVA_BOXED.get(item_kind or "any", item_kind)
        if not value:
            return f"new ArrayList<{boxed}>()"
        # Arrays.asList elements: String and char elements lose their quotes, the rest go through the item type
        elements = ", ".join(_quoted(v) if item_kind in ("String", "char") and isinstance(v, str)
                             else _java(v, item_kind, None) if item_kind else _java_scalar(v) for v in value)
        return f"new ArrayList<{boxed}>(Arrays.asList({elements}))"
    if kind == "HashMap" and isinstance(value, dict):
        puts = " ".join(f"put({_quoted(k)}, {_java_scalar(v)});" for k, v in value.items())
        return f"new HashMap<String, Object>() {{{{ {puts} }}}}" if puts else "new HashMap<String, Object>()"
    return _java_scalar(value)


def _js_scalar(value: Any) -> str:
    """A value inside a JavaScript array or object: as bfcl-eval's ``parse_js_value`` reads it back."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return _quoted(value)
    if isinstance(value, list):
        return "[" + ", ".join(_js_scalar(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_js_scalar(v)}" for k, v in value.items()) + "}"
    return str(value)


def _js(value: Any, kind: str, item_kind: str | None) -> str:
    if kind == "String" and isinstance(value, str):
        return _quoted(value)
    if isinstance(value, str):
        return value
    if kind == "Bigint" and isinstance(value, int) and not isinstance(value, bool):
        return f"{value}n"
    if kind == "array" and isinstance(value, list):
        return "[" + ", ".join(_js(v, item_kind, None) if item_kind else _js_scalar(v) for v in value) + "]"
    return _js_scalar(value)


def source(value: Any, param: dict, language: str) -> str:
    """``value`` as the source text of a ``language`` ("java" or "javascript") argument documented by ``param``."""
    kind, item_kind = param.get("type", "any"), (param.get("items") or {}).get("type")
    if language == "java":
        return _java(value, kind, item_kind)
    if language == "javascript":
        return _js(value, kind, item_kind)
    raise ValueError(f"no source syntax for language {language!r}; use 'java' or 'javascript'")
