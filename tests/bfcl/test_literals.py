"""``agentrl_bfcl.literals``: Python values written as Java / JavaScript source text, read back by bfcl-eval's own
type converters (``java_type_converter`` / ``js_type_converter``, the ones its AST checker calls) as the value."""

import pytest

from agentrl_bfcl import bfcl
from agentrl_bfcl.literals import source

bfcl.require()
from bfcl_eval.eval_checker.ast_eval.type_convertor.java_type_converter import java_type_converter  # noqa: E402
from bfcl_eval.eval_checker.ast_eval.type_convertor.js_type_converter import js_type_converter  # noqa: E402

JAVA = [  # (value, documented type, item type, source text)
    (True, "boolean", None, "true"),
    (False, "boolean", None, "false"),
    (42, "integer", None, "42"),
    (-7, "short", None, "-7"),
    (42, "long", None, "42L"),
    (0.5, "double", None, "0.5"),
    (2.5, "float", None, "2.5f"),
    (3, "float", None, "3.0f"),
    ("mapController", "any", None, "mapController"),
    ("SELECT * FROM t WHERE s = 'a'", "String", None, "SELECT * FROM t WHERE s = 'a'"),
    ("ResultSet.TYPE_SCROLL_INSENSITIVE", "integer", None, "ResultSet.TYPE_SCROLL_INSENSITIVE"),  # a constant's name
    ([2, 7, 11], "Array", "integer", "new int[]{2, 7, 11}"),
    (["a:b", "c"], "Array", "String", "new String[]{a:b, c}"),
    ([101, 202], "ArrayList", "long", "new ArrayList<Long>(Arrays.asList(101L, 202L))"),
    (["GC pause"], "ArrayList", "String", 'new ArrayList<String>(Arrays.asList("GC pause"))'),
    ([], "ArrayList", "String", "new ArrayList<String>()"),
    ({"limit": 50, "schema": "public", "on": True}, "HashMap", None,
     'new HashMap<String, Object>() {{ put("limit", 50); put("schema", "public"); put("on", true); }}'),
    ({}, "HashMap", None, "new HashMap<String, Object>()"),
]

JAVASCRIPT = [
    (True, "Boolean", None, "true"),
    (3, "integer", None, "3"),
    (4.0, "float", None, "4.0"),
    (10**20, "Bigint", None, "100000000000000000000n"),
    ("userInputField", "String", None, '"userInputField"'),
    ("listElement", "any", None, "listElement"),
    ("myItemList", "array", "String", "myItemList"),  # a variable's name where an array is documented
    (["completed", "failed"], "array", "String", '["completed", "failed"]'),
    ([60, 30], "array", "float", "[60, 30]"),
    ({"initialState": "s0", "count": 3, "on": False}, "dict", None, '{initialState: "s0", count: 3, on: false}'),
    ({}, "dict", None, "{}"),
]


@pytest.mark.parametrize("value, kind, item, text", JAVA)
def test_java_source_reads_back_as_the_value(value, kind, item, text):
    param = {"type": kind, **({"items": {"type": item}} if item else {})}
    assert source(value, param, "java") == text
    assert java_type_converter(text, kind, *([item] if item else [])) == value


@pytest.mark.parametrize("value, kind, item, text", JAVASCRIPT)
def test_javascript_source_reads_back_as_the_value(value, kind, item, text):
    param = {"type": kind, **({"items": {"type": item}} if item else {})}
    assert source(value, param, "javascript") == text
    assert js_type_converter(text, kind, *([item] if item else [])) == value


def test_other_languages_are_refused_by_name():
    with pytest.raises(ValueError, match="no source syntax for language 'python'; use 'java' or 'javascript'"):
        source(1, {"type": "integer"}, "python")
