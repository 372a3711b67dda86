"""The calculator MCP server. Each tool's type hints are its schema and its docstring its description.

``--delay SECONDS`` makes every call answer that much later (without holding up other calls): a stand-in
for a slow production tool, for benchmarks and tests of how training copes with one.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import functools
import math
import operator

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

app = MCPServer(
    "calculator",
    instructions="Arithmetic tools. Use them instead of computing by hand.",
    log_level="WARNING",
)
DELAY = 0.0  # seconds each call waits before answering (--delay)


def tool(fn):
    """Register ``fn`` as a tool that answers after ``DELAY`` seconds; calls wait side by side."""

    @functools.wraps(fn)
    async def delayed(*args, **kwargs):
        if DELAY:
            await asyncio.sleep(DELAY)
        return fn(*args, **kwargs)

    return app.tool()(delayed)


def _number(x: float) -> float | int:
    """Whole results as integers, so 2 + 3 reads 5 and not 5.0."""
    if isinstance(x, float) and x.is_integer() and abs(x) < 2**53:
        return int(x)
    return x


@tool
def add(a: float, b: float) -> float:
    """Add two numbers: a + b."""
    return _number(a + b)


@tool
def subtract(a: float, b: float) -> float:
    """Subtract b from a: a - b."""
    return _number(a - b)


@tool
def multiply(a: float, b: float) -> float:
    """Multiply two numbers: a * b."""
    return _number(a * b)


@tool
def divide(a: float, b: float) -> float:
    """Divide a by b: a / b. Dividing by zero is an error."""
    if b == 0:
        raise ToolError("division by zero: b must not be 0")
    return _number(a / b)


@tool
def power(base: float, exponent: float) -> float:
    """Raise base to exponent: base ** exponent (|exponent| at most 1000)."""
    if abs(exponent) > 1000:
        raise ToolError("exponent too large: use |exponent| <= 1000")
    try:
        return _number(math.pow(base, exponent))
    except (OverflowError, ValueError) as exc:
        raise ToolError(f"cannot compute {base} ** {exponent}: {exc}") from None


@tool
def sqrt(x: float) -> float:
    """Square root of x (x >= 0)."""
    if x < 0:
        raise ToolError("sqrt of a negative number: x must be >= 0")
    return _number(math.sqrt(x))


_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}


def _eval(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > 1000:
            raise ToolError("exponent too large: use |exponent| <= 1000")
        if isinstance(node.op, (ast.Div, ast.FloorDiv, ast.Mod)) and right == 0:
            raise ToolError("division by zero")
        return _BINARY[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand))
    raise ToolError(f"unsupported syntax {ast.unparse(node)!r}: use numbers, + - * / // % ** and parentheses")


@tool
def evaluate(expression: str) -> float:
    """Evaluate an arithmetic expression such as "(2 + 3) * 4 / 5" (numbers, + - * / // % ** and parentheses)."""
    if len(expression) > 500:
        raise ToolError("expression too long: at most 500 characters")
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError as exc:
        raise ToolError(f"not an arithmetic expression: {exc.msg}") from None
    try:
        return _number(_eval(tree))
    except OverflowError:
        raise ToolError("result too large") from None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="agentrl_calculator", description=__doc__)
    parser.add_argument("--http", action="store_true", help="serve streamable HTTP instead of stdio")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--delay", type=float, default=0.0, metavar="SECONDS",
                        help="answer every call this many seconds late (a stand-in for a slow tool)")
    args = parser.parse_args(argv)
    if not args.delay >= 0 or args.delay == float("inf"):
        parser.error(f"--delay must be a finite number of seconds >= 0, got {args.delay}")
    global DELAY
    DELAY = args.delay
    if args.http:
        app.run("streamable-http", host=args.host, port=args.port)
    else:
        app.run()


if __name__ == "__main__":
    main()
