"""Whether a secret-named field's value is code: an expression read from Python's tokens, not a literal.

`self.password = password or ""`, `token = prefix + " "`, `key: Ed25519PrivateKey | None`: the value
is a name, an operator, an annotation. A regular expression over the line cannot tell `prefix + " "`
from a pass phrase; the standard `tokenize` module can, for Python and for the languages whose
expressions read the same way (JavaScript, TypeScript, Go, Java, C#). It runs only where a field's
value is in doubt, on the rest of that one line, so that a cut file (a range of lines, a search hit)
reads as well as a whole one. Where the tokens do not read as an expression (a `$`, an unclosed
quote, one bare word) the caller decides as before: in doubt, the value is masked.
"""

from __future__ import annotations

import io
import tokenize
from dataclasses import dataclass
from typing import Final

from oct_mcp.redaction.checks import is_words

__all__ = ["Expression", "expression"]

# Operators that join two operands. `?` is no Python operator (an ERRORTOKEN), but JavaScript's
# ternary and `??` read the same way.
_BINARY: Final = frozenset(
    {"+", "-", "*", "/", "//", "%", "**", "|", "&", "^", "<<", ">>", "@", "==", "!=", "<", "<=", ">", ">="}
    | {"===", "!==", "||", "&&", "??", "?", "->"}
)
_KEYWORDS: Final = frozenset({"or", "and", "if", "else", "is", "in", "not", "await", "lambda", "new"})
_STATEMENT_ENDS: Final = frozenset({",", ";", ")", "]", "}"})
_OPENING: Final = frozenset({"(", "[", "{"})
_SKIPPED: Final = frozenset({tokenize.NL, tokenize.NEWLINE, tokenize.ENDMARKER, tokenize.COMMENT})
_LINE_LIMIT: Final = 1024
_STRING_PREFIX: Final = frozenset("bBrRuUfF")


@dataclass(frozen=True, slots=True)
class Expression:
    """A value that is code; the string literals in it, as (start, end) of their content in the text."""

    strings: tuple[tuple[int, int], ...]


def _tokens(line: str) -> list[tokenize.TokenInfo] | None:
    """The tokens of one line's value up to where the statement or item ends; None: not Python-like."""
    found: list[tokenize.TokenInfo] = []
    depth = 0
    try:
        for token in tokenize.generate_tokens(io.StringIO(line).readline):
            if token.type in _SKIPPED or token.start[0] > 1:
                break
            if token.type == tokenize.ERRORTOKEN:
                if token.string == "?":
                    last = found[-1] if found else None
                    if last is not None and last.string == "?" and last.end == token.start:
                        found[-1] = last._replace(string="??", end=token.end)  # `a ?? b`
                    else:
                        found.append(token)
                    continue
                if token.string.isspace():
                    continue
                return None  # `$`, `!`, a lone quote: shell, a template, or a fragment
            if token.type == tokenize.OP:
                if token.string in _OPENING:
                    depth += 1
                elif token.string in _STATEMENT_ENDS:
                    if depth == 0:
                        break
                    depth -= 1
            found.append(token)
    except (tokenize.TokenError, SyntaxError):
        # A fragment: a bracket or a triple quote the cut left open. What was read so far stands.
        pass
    return found


def _operands(left: tokenize.TokenInfo, right: tokenize.TokenInfo) -> tuple[bool, bool]:
    """Whether both sides are operands, and whether either is a string or a bracket (no password's)."""
    operand_types = (tokenize.NAME, tokenize.NUMBER, tokenize.STRING)
    left_ok = left.type in operand_types or left.string in (")", "]", "}")
    right_ok = right.type in operand_types or right.string in ("(", "[", "{", "-", "not")
    unambiguous = (
        tokenize.STRING in (left.type, right.type) or left.string in (")", "]") or right.string == "("
    )
    return left_ok and right_ok, unambiguous


def _is_expression(tokens: list[tokenize.TokenInfo]) -> bool:
    if len(tokens) > 1 and tokens[-1].string == ":":
        tokens = tokens[:-1]  # `if not password == user.password:`: the statement's colon
    if len(tokens) == 2 and tokens[1].string in _BINARY and _continued(tokens[0]):
        return True  # `KEY: PREFIX +`: the expression goes on on the next line
    if len(tokens) < 2:
        return False
    for index, token in enumerate(tokens):
        if token.type == tokenize.NAME and token.string in _KEYWORDS:
            if 0 < index < len(tokens) - 1:
                return True
            if index == 0 and token.string in ("not", "await", "lambda", "new") and len(tokens) > 1:
                return True
        if token.string in _BINARY and 0 < index < len(tokens) - 1:
            left, right = tokens[index - 1], tokens[index + 1]
            both, unambiguous = _operands(left, right)
            spaced = left.end[1] < token.start[1] and token.end[1] < right.start[1]
            # `Ab+cd/ef` is a password as often as an expression; `a + b` and `"x" + y` are code.
            if both and (spaced or unambiguous):
                return True
    return _attribute_chain(tokens)


def _continued(left: tokenize.TokenInfo) -> bool:
    """An operand a line may end on before its operator's right side: a name or a string."""
    return left.type == tokenize.STRING or (left.type == tokenize.NAME and _named_attribute(left.string))


def _attribute_chain(tokens: list[tokenize.TokenInfo]) -> bool:
    """`AWSS3Storage.prefix`, `url.password`: names joined by dots, each attribute a word."""
    if len(tokens) < 3 or len(tokens) % 2 == 0:
        return False
    for index, token in enumerate(tokens):
        if index % 2 == 0:
            if token.type != tokenize.NAME:
                return False
        elif token.string != ".":
            return False
    # `hdrs.SEC_WEBSOCKET_KEY1`, `np.int64`: a name may end in digits, after a word of its own; a
    # letter and digits (`aabcd.f0`) is how a password with a dot reads, not a name.
    attributes = [token.string for token in tokens[2::2]]
    if not all(map(_named_attribute, attributes)):
        return False
    # One letter (`weights.T`) says little: the chain is code when what it starts from is a name too,
    # not when a generated value has a dot near its end (`XpyyP60AQ.Q`).
    return all(len(name) > 1 for name in attributes) or _named_attribute(tokens[0].string)


def _named_attribute(name: str) -> bool:
    core = name.strip("_")
    stem = core.rstrip("0123456789")
    return is_words(stem) and (stem == core or len(stem) >= 2)


def _content(token: tokenize.TokenInfo, offset: int) -> tuple[int, int] | None:
    """Where a string token's content is in the text (its prefix and quotes left out); None: f-string."""
    text = token.string
    prefix = 0
    while prefix < len(text) and text[prefix] in _STRING_PREFIX:
        prefix += 1
    if "f" in text[:prefix].lower():
        return None  # a template: its literal pieces are formats, not values
    quote = 3 if text[prefix : prefix + 3] in ('"""', "'''") else 1
    start = offset + token.start[1] + prefix + quote
    end = offset + token.end[1] - quote
    return (start, end) if start < end else None


def expression(text: str, start: int) -> Expression | None:
    """Read the value that starts at `start` in `text` (to its line's end) as Python tokens.

    Args:
        text: The text being redacted.
        start: Where the field's value starts (after the operator and blanks).

    Returns:
        The expression, when the value is one (a name with an operator, a keyword such as `or`,
        an attribute chain, a string joined to something); None when it is a literal, one bare
        word, or does not read as Python (the caller then judges it as before).
    """
    stop = text.find("\n", start, start + _LINE_LIMIT)
    line = text[start : stop if stop != -1 else start + _LINE_LIMIT].rstrip("\r")
    tokens = _tokens(line)
    if tokens is None or not _is_expression(tokens):
        return None
    strings = tuple(
        span
        for token in tokens
        if token.type == tokenize.STRING
        for span in (_content(token, start),)
        if span is not None
    )
    return Expression(strings)
