"""The detector set: each credential format as keywords, a pattern and a check, from its published format.

The kinds, by how they are found (a mask names its kind, the same for a secret wherever it is):

| kinds | found by |
|---|---|
| provider tokens (`github_token`, `stripe_key`, `fcm_server_key`, ...) | prefix, length, alphabet |
| `private_key`, `aws_session_token`, `jwt` | armour, a fixed base64 start, shape |
| `session_cookie`, `authorization`, `url_password` | the cookie name, header, URL userinfo |
| `url_key`, `webhook_url`, `teams_webhook_url` | a key's query parameter, a webhook's path |
| `password`, `token`, `secret`, `api_key`, ... | a secret-named field, flag or env entry |
| `twilio_auth_token`, `okta_token`, `mailgun_api_key`, `sumologic_key` | a provider's name nearby |

A detector that needs a context word (`sessionid=`, `-p`, `Authorization: Bearer`, `PGPASSWORD=`)
masks the value only: the word stays, so a reader and the edit tools see what was there.

Public identifiers stay visible (`PUBLIC_PREFIXES`): Stripe's publishable keys (`pk_live_`,
`pk_test_`), Mapbox public tokens (`pk.eyJ`), Flutterwave public keys (`FLWPUBK`), Supabase
publishable keys (`sb_publishable_`) and `pub_`/`pubkey-` keys are shipped to browsers and apps by
design and grant nothing alone. A field or a guess never masks them, and no provider detector
matches them. OAuth client ids, account numbers and ARNs are names, not secrets, and no detector
is written for them; key ids that sign requests (AWS `AKIA...`, Twilio `AC...`) are masked.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Final
from urllib.parse import unquote

from oct_mcp.redaction import code
from oct_mcp.redaction.checks import (
    char_classes,
    is_literal_secret,
    is_placeholder,
    is_reference,
    is_sample_pair,
    is_spelt_placeholder,
    is_words,
    looks_random,
)
from oct_mcp.redaction.code import Expression

__all__ = [
    "CONTEXT",
    "DETECTORS",
    "GENERIC",
    "GUESS",
    "KINDS",
    "PROVIDER",
    "SECRET_NAME",
    "Detector",
    "Span",
    "secret_field_kind",
]

# When spans of two detectors overlap, the union is masked under the kind of the higher priority:
# a format that names its issuer beats a format known by its context, which beats a field name,
# which beats a guess from a name that only ends in `_KEY`.
PROVIDER: Final = 3
CONTEXT: Final = 2
GENERIC: Final = 1
GUESS: Final = 0

Span = tuple[int, int, str, int]
"""A span to mask: start, end (offsets in the text), kind, priority."""

Finish = Callable[["Detector", "re.Match[str]"], Iterable[Span]]


@dataclass(frozen=True, slots=True)
class Detector:
    """One credential format.

    A keyword hit runs `pattern` there: anchored (`pattern.match` at the keyword's start less
    `back`), or with `window` > 0 searched in that many characters either side. Keywords are
    lower case and met in lower-cased text. A `scan` detector has no keywords: its pattern runs
    over the whole text, and starts with a literal, so that `re` skips to it at memchr speed.
    """

    kind: str
    keywords: tuple[str, ...]
    pattern: re.Pattern[str]
    priority: int = PROVIDER
    back: int = 0
    window: int = 0
    scan: bool = False
    min_length: int = 0
    """The fewest characters a match spans: a shorter text skips this `scan` detector's pass."""
    check: Callable[[str], bool] | None = None
    finish: Finish | None = None
    find: Callable[[str], Iterable[re.Match[str]]] | None = None
    """A `scan` detector's own search for matches of `pattern`, where `pattern.finditer` would be slow.

    It yields matches of `pattern` only, so that the screen may rule the pass out by its superset.
    """
    prefiltered: bool = False
    """Its keywords are looked for only on the lines `prefilter.field_lines` gives (field names)."""

    def spans(self, match: re.Match[str]) -> Iterable[Span]:
        """The spans to mask for one match: the `secret` group (else the whole match), if it passes."""
        if self.finish is not None:
            return self.finish(self, match)
        group = "secret" if "secret" in self.pattern.groupindex else 0
        value = match.group(group)
        if self.check is not None and not self.check(value):
            return ()
        return ((match.start(group), match.end(group), self.kind, self.priority),)


def _compile(pattern: str) -> re.Pattern[str]:
    # ASCII: \w, \s and IGNORECASE stay ASCII, so a Kelvin sign never passes for a "k".
    return re.compile(pattern, re.ASCII)


def _token_ok(value: str) -> bool:
    """A format-valid token, not a stand-in (`ghp_xxxx...`, `AKIA0000...`)."""
    return not is_placeholder(value, words=False)


def _random_token_ok(value: str) -> bool:
    """For formats whose body is loose (`sk-...`, `xoxb-...`): a stand-in or a word is not a token."""
    return not is_placeholder(value, words=False) and char_classes(value) >= 2


_PLACEHOLDER_PASSWORDS: Final = frozenset(
    {"password", "passwd", "pass", "pwd", "secret", "token", "changeme", "pw", "xxx", "***", "...", "hunter2"}
)


def _password_ok(value: str) -> bool:
    """A password in a URL or netrc: any word is plausible (`postgres:postgres`), stand-ins are not
    (`changeme`, `p4ssw0rd`, as under a field name)."""
    lowered = unquote(value).lower()  # as the URL's percent escapes write it
    if lowered in _PLACEHOLDER_PASSWORDS or is_reference(value) or is_spelt_placeholder(lowered):
        return False
    return not is_placeholder(value) and "{{" not in value


def _prefixed(
    kind: str,
    keywords: Sequence[str],
    pattern: str,
    *,
    check: Callable[[str], bool] = _token_ok,
    back: int = 0,
) -> Detector:
    return Detector(kind, tuple(keywords), _compile(pattern), PROVIDER, back=back, check=check)


_HEX_DIGITS: Final = "0123456789abcdef"

# Boundaries: a token does not start or end inside a longer run of token characters.
_L = r"(?<![A-Za-z0-9])"
_LU = r"(?<![A-Za-z0-9_])"
_LUD = r"(?<![A-Za-z0-9_-])"
_R = r"(?![A-Za-z0-9])"
_RU = r"(?![A-Za-z0-9_])"
_RUD = r"(?![A-Za-z0-9_-])"

# How a field is given its value: closing quote or bracket, operator, opening quote.
_CLOSE = r"""(?:\\?["'`]){0,1}\]?"""
_OP = r"""(?P<op>:=|=>|===?|=(?!=)|:(?![:=])|\?=|\|\|=)"""
_OPEN = r"""(?:\\?["'`])?"""


# ---------------------------------------------------------------------------------------------
# Finishers: the detectors whose span is more than one regex group.


def _aws_key_id(detector: Detector, match: re.Match[str]) -> Iterable[Span]:
    spans: list[Span] = []
    if _token_ok(match["id"]):
        spans.append((match.start("id"), match.end("id"), "aws_access_key_id", PROVIDER))
    pair = match["pair"]
    # A 40-character run right after a key id (the console's CSV, `id:secret`) is its secret.
    if pair is not None and char_classes(pair) >= 3 and _token_ok(pair):
        spans.append((match.start("pair"), match.end("pair"), "aws_secret_access_key", PROVIDER))
    return spans


_PEM_END: Final = _compile(r"-{4,5} ?END[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)? ?-{4,5}")
_PEM_BODY: Final = _compile(r"(?:[A-Za-z0-9+/=\\ \t\r\n]|(?:Proc-Type|DEK-Info|Comment):[^\n]*)*+")
_PEM_LIMIT: Final = 64 * 1024
# Some body: a run of eight base64 characters or more with both cases in it, as any piece of a
# key's body has (64 a line); names in code between armour lines (`b64encode`, `der`) are
# broken up by underscores, dots and brackets, and seldom mix cases so.
_BODY_PRESENT: Final = _compile(r"(?=[A-Za-z0-9+/]*[A-Z])(?=[A-Za-z0-9+/]*[a-z])[A-Za-z0-9+/]{8}")
# Between the armour lines of a key written as joined string literals: the rest of the BEGIN line's
# literal, then whole literals a line (a prefix such as `b`, an optional `+`, `,` or line-joining
# `\\`), then the start of the END line's: base64 and `\\n`-like escapes inside the quotes only.
_LITERAL_CONTENT: Final = r"(?:\\[nrt]|[A-Za-z0-9+/=])*"
_LITERAL_JOIN: Final = r"[ \t]*[+,]?[ \t]*\\?\r?\n[ \t]*[bBrRuU]{0,2}[\"']"
_JOINED_LITERALS: Final = _compile(
    _LITERAL_CONTENT
    + r"[\"']"
    + r"(?:"
    + _LITERAL_JOIN
    + _LITERAL_CONTENT
    + r"[\"'])*"
    + _LITERAL_JOIN
    + _LITERAL_CONTENT
)
# A piece of a body inside a string literal: base64 with a letter or a digit in it, right after a
# quote or a `\\n` escape, where a literal's content starts (a string's prefix, `b"`, the `+`
# between literals and the escape's own `n` are code).
_BODY_PIECE: Final = _compile(r"""(?:(?<=["'])|(?<=\\[nrt]))(?=[+/=]*[A-Za-z0-9])[A-Za-z0-9+/=]+""")


def _pem_block(detector: Detector, match: re.Match[str]) -> Iterable[Span]:
    """The whole block, BEGIN to END, however many lines and whatever escapes (`\\n` in JSON).

    Two blocks are not masked whole: armour with no body between (the markers a parser looks for,
    a key built in code from other parts), which holds no key; and a block written as string
    literals joined in code (`"-----BEGIN ...\\n"` then `"MIIE...\\n"` a line), whose pieces of key
    are each masked, the quotes and the code between them kept.
    """
    text = match.string
    end = _PEM_END.search(text, match.end(), match.end() + _PEM_LIMIT)
    if end is not None:
        between = text[match.end() : end.start()]
        if _BODY_PRESENT.search(between) is None:
            return ()
        if _JOINED_LITERALS.fullmatch(between) is not None:
            # Found by the armour around them: each piece has the boundary the literal gives it
            # (CONTEXT: never widened over a word it touches, the `n` of a `\\n` before it). Only
            # literals and the blanks, `+` and `,` that join them are between: any other text, a
            # stray quote among bare lines included, has the block masked whole.
            return tuple(
                (piece.start(), piece.end(), detector.kind, CONTEXT)
                for piece in _BODY_PIECE.finditer(text, match.end(), end.start())
            )
        return ((match.start(), end.end(), detector.kind, detector.priority),)
    # No END (output cut short): mask the body that follows, so no part of the key is left.
    body = _PEM_BODY.match(text, match.end())
    stop = body.end() if body is not None else match.end()
    while stop > match.end() and text[stop - 1] in " \t\r\n":
        stop -= 1
    return ((match.start(), stop, detector.kind, detector.priority),)


# A key's body without its armour (a range of lines, a search hit, a diff hunk): lines of base64
# of the lengths key formats wrap at (64: PEM, PuTTY, PGP; 70: OpenSSH; 76: MIME), each after an
# optional indent or diff marker. Two full lines at least, then an optional short last line.
_BODY_LINE: Final = r"[A-Za-z0-9+/]{64}(?:[A-Za-z0-9+/]{6}){0,2}+"
# Not possessive: a body line may itself start with `+`, which the diff marker then gives back.
_BODY_INDENT: Final = r"[ \t]{0,16}+[+-]?"
_KEY_BODY_RUN: Final = (
    _BODY_INDENT
    + r"(?P<secret>"
    + _BODY_LINE
    + r"(?:\r?\n"
    + _BODY_INDENT
    + _BODY_LINE
    # Not possessive: a last line of 64 or more characters in a run 70 or 76 wide is given back.
    + r")+(?:\r?\n"
    + _BODY_INDENT
    + r"[A-Za-z0-9+/]{4,75}={0,2}(?=\r?\n|\Z))?)(?![A-Za-z0-9+/=])"
)
_BODY_LENGTHS: Final = frozenset({64, 70, 76})
_ARMOUR: Final = _compile(r"-{4,5} ?BEGIN ([ A-Z0-9]{1,40}?) ?-{4,5}")
_ARMOUR_END: Final = _compile(r"-{4,5} ?END [ A-Z0-9]{1,40}? ?-{4,5}")
_ARMOUR_AFTER: Final = _compile(r"\r?\n[ \t]{0,16}+[+-]?-{4,5} ?END ([ A-Z0-9]{1,40}?) ?-{4,5}")
# A run is matched from its first line, so a block's armour is right above it, past a few headers.
_ARMOUR_LOOK_BACK: Final = 512
# The DER a body decodes to, when the run starts at the body's first line: a private key starts
# with its version (`SEQUENCE { INTEGER 0|1 ...`: PKCS#1, PKCS#8, SEC 1); a certificate, a public
# key or a request starts with a SEQUENCE in the SEQUENCE.
_DER_SEQUENCE_IN_SEQUENCE: Final = re.compile(rb"\x30(?:[\x00-\x7f]|\x81.|\x82..|\x83...)\x30", re.DOTALL)
# A private key's version right inside its SEQUENCE (PKCS#1 and PKCS#8: 0, SEC 1: 1), and the
# base64 of OpenSSH's `openssh-key-v1\0`: what no certificate, public key or request starts with.
_PRIVATE_HEAD: Final = re.compile(rb"\x30(?:[\x00-\x7f]|\x81.|\x82..|\x83...)\x02\x01[\x00\x01]", re.DOTALL)
_OPENSSH_PRIVATE_HEAD: Final = "b3BlbnNzaC1rZXktdjEA"


def _inside_public_armour(text: str, start: int, end: int) -> bool:
    """Whether the run from `start` to `end` is the whole body of a public block (a certificate).

    Its `-----BEGIN X-----` line is above it, with no private key in X, and its `-----END X-----`
    line right after it; a BEGIN line alone (a hunk, a cut) does not vouch for what follows.
    """
    low = max(0, start - _ARMOUR_LOOK_BACK)
    begin = max(text.rfind("-----BEGIN ", low, start), text.rfind("---- BEGIN ", low, start))
    if begin == -1:
        return False
    armour = _ARMOUR.match(text, begin, start)
    if armour is None or "PRIVATE" in armour[1]:
        return False
    if _ARMOUR_END.search(text, armour.end(), start) is not None:
        return False
    after = _ARMOUR_AFTER.match(text, end)
    return after is not None and after[1] == armour[1]


def _body_line(line: str) -> str:
    """A line of a run without its indent, its diff marker and its carriage return."""
    line = line.lstrip(" \t").rstrip("\r")
    if len(line) - 1 in _BODY_LENGTHS and line[0] in "+-":
        return line[1:]
    return line


_KEY_BODY: Final = _compile(_KEY_BODY_RUN)
_BASE64_LINE: Final = _compile(r"[A-Za-z0-9+/]+")
# Where a run may start: a line break, then a full line. Cheap for `re` (4 ms for 4 MiB of tool
# output), where the whole run's pattern tried at every line break cost 30 ms (measured).
_KEY_BODY_LINE_START: Final = _compile(r"\n[ \t]{0,16}+[+-]?[A-Za-z0-9+/]{64}")


def _find_key_bodies(text: str) -> Iterator[re.Match[str]]:
    """The runs of body lines in `text`, each matched from its first line."""
    match = _KEY_BODY.match(text)
    reach = 0
    while True:
        if match is not None:
            reach = match.end()
            yield match
        # Searched again past each run, not stepped through its lines (a line is a candidate each).
        candidate = _KEY_BODY_LINE_START.search(text, reach)
        if candidate is None:
            return
        reach = candidate.start() + 1
        match = _KEY_BODY.match(text, reach)


def _key_body(detector: Detector, match: re.Match[str]) -> Iterable[Span]:
    """A run of base64 lines of one key-body length, with no public armour above it: a private key."""
    # The pattern holds two full lines at least; the first two decide (30 us a run to check all).
    body = match["secret"]
    first_end = body.index("\n")
    second_end = body.find("\n", first_end + 1)
    first = _body_line(body[:first_end])
    second = _body_line(body[first_end + 1 : second_end if second_end != -1 else len(body)])
    width = len(first)
    if len(second) != width or char_classes(first) < 3 or char_classes(second) < 3:
        return ()  # random base64 mixes cases and digits on every line; two lines tell it from words
    text, start = match.string, match.start("secret")
    line_start = text.rfind("\n", 0, start) + 1
    if line_start:
        before = _body_line(text[text.rfind("\n", 0, line_start - 1) + 1 : line_start - 1])
        if len(before) == width and _BASE64_LINE.fullmatch(before):
            return ()  # the run starts a line earlier: the match from there decides
    try:
        head = base64.b64decode(first[:64], validate=True)
    except (binascii.Error, ValueError):
        return ()
    if _inside_public_armour(text, start, match.end("secret")):
        # The label says public, but only a body that reads as public is: a private key's body
        # printed under `-----BEGIN CERTIFICATE-----` (relabelled to pass) is masked all the same.
        if _PRIVATE_HEAD.match(head) is None and not first.startswith(_OPENSSH_PRIVATE_HEAD):
            return ()
    elif _DER_SEQUENCE_IN_SEQUENCE.match(head):
        return ()
    return ((start, match.end("secret"), detector.kind, detector.priority),)


_PUTTY_END: Final = _compile(r"Private-MAC: *[0-9a-fA-F]+|\n[ \t]*\n")


def _putty_block(detector: Detector, match: re.Match[str]) -> Iterable[Span]:
    text = match.string
    end = _PUTTY_END.search(text, match.end(), match.end() + _PEM_LIMIT)
    stop = end.end() if end is not None else min(len(text), match.end() + _PEM_LIMIT)
    return ((match.start(), stop, detector.kind, detector.priority),)


def _base64_pem(detector: Detector, match: re.Match[str]) -> Iterable[Span]:
    """A PEM block in base64 (kubeconfig `client-key-data`): a secret only if it is a private key."""
    head = match.group(0)[:64]
    try:
        decoded = base64.b64decode(head + "=" * (-len(head) % 4))
    except (binascii.Error, ValueError):
        return ()
    if b"PRIVATE KEY" not in decoded:
        return ()
    return ((match.start(), match.end(), detector.kind, detector.priority),)


_SCHEME_BEFORE: Final = _compile(r"(?:https?://)?(?:[a-z0-9-]{1,63}\.)?\Z")


def _whole_url(detector: Detector, match: re.Match[str]) -> Iterable[Span]:
    """A webhook URL is its own secret: mask it from the scheme on (a tenant's host name too)."""
    text = match.string
    before = _SCHEME_BEFORE.search(text, max(0, match.start() - 72), match.start())
    start = before.start() if before is not None else match.start()
    if is_placeholder(match.group(0).rsplit("/", 1)[-1], words=False):
        return ()
    return ((start, match.end(), detector.kind, detector.priority),)


def _fly_macaroon(detector: Detector, match: re.Match[str]) -> Iterable[Span]:
    """A Fly.io macaroon token, with the `FlyV1 ` that Fly prints as part of it."""
    if not _random_token_ok(match.group(0)):
        return ()
    start = match.start()
    if match.string.startswith(_FLY_SCHEME, max(0, start - len(_FLY_SCHEME))):
        start -= len(_FLY_SCHEME)
    return ((start, match.end(), detector.kind, detector.priority),)


_FLY_SCHEME: Final = "FlyV1 "
_DISCORD_ID: Final = _compile(r"(?<![A-Za-z0-9_.-])[MNO][A-Za-z0-9_-]{23,27}\Z")
_TELEGRAM_ID: Final = _compile(r"(?:(?<![A-Za-z0-9])|(?<=/bot))\d{5,16}\Z")


def _with_head(detector: Detector, match: re.Match[str], head: re.Pattern[str]) -> Iterable[Span]:
    """A token found by its tail: it counts only if `head` ends right where the tail starts."""
    text = match.string
    found = head.search(text, max(0, match.start() - 32), match.start())
    if found is None:
        return ()
    token = text[found.start() : match.end()]
    if not _random_token_ok(token):
        return ()
    return ((found.start(), match.end(), detector.kind, detector.priority),)


def _datadog(detector: Detector, match: re.Match[str]) -> Iterable[Span]:
    if not _token_ok(match["secret"]):
        return ()
    kind = "datadog_app_key" if "app" in match["name"].lower() else "datadog_api_key"
    return ((match.start("secret"), match.end("secret"), kind, detector.priority),)


_VALUE_GROUPS: Final = ("dq", "sq", "bq", "eq", "xv", "uq")


def _value(match: re.Match[str]) -> tuple[str, str]:
    """The value group that matched (each alternative of the field pattern sets exactly one)."""
    group = next(group for group in _VALUE_GROUPS if match.group(group) is not None)
    return group, match.group(group)


def secret_field_kind(name: str) -> str:
    """The mask kind for a secret-named field: `password`, `token`, `private_key`, `api_key`, ...

    Args:
        name: The field's name, or the part of it that made it secret (`db_password`, `apiKey`).

    Returns:
        The kind the value of such a field is masked as.
    """
    lowered = name.lower()
    if lowered.startswith(("pass", "pw")) or "passw" in lowered or "pwd" in lowered:
        return "password"
    if "private" in lowered:
        return "private_key"
    if "token" in lowered or "auth" in lowered:
        return "token"
    if "secret" in lowered:
        return "secret"
    if "cred" in lowered:
        return "credential"
    return "api_key"


_FIRST_TOKEN: Final = _compile(r"""[^\s"'`,;&|<>(){}\[\]\\]{6,512}+(?![(\[])""")
# Unquoted, the rest of a line is code, not a value, when it calls, indexes, compares or branches.
_CODE_LINE: Final = _compile(
    r"[()\[\]{}]|[:;,{]\Z"
    r"|[ \t](?:if|else|and|or|not|in|is|for|return|await|new|\+|-|\*|/|=|==|!=|\||\|\||&&|\?\?|\?)[ \t]"
)
# A value with blanks in it that holds one of these words is a sentence (a label, a message).
_PROSE_WORDS: Final = frozenset(
    {"the", "your", "enter", "must", "please", "required", "invalid", "incorrect", "should", "cannot"}
    | {"characters", "field", "is", "are", "was", "not", "too", "expired", "missing", "reset", "forgot"}
)
_AUTH_SCHEME: Final = _compile(r"(?i:bearer|basic|token|bot|digest|ssws)[ \t]+(?=\S)")
# `auth: refreshed token=*** user=3`: a log line's fields after the first word, not one value.
_ANOTHER_FIELD: Final = _compile(r"[ \t][A-Za-z_][\w.-]{0,64}=")
# A query's or a form body's next parameter (`oauth_token=foo&oauth_token_secret=bar`), where the
# field is itself one: after `?`, `&` or the quote that opens the string. Elsewhere (`DB_PASSWORD=`
# on its line, `password = ...`) an `&` is the value's own (`aa&cdefh=0`).
_NEXT_PARAMETER: Final = _compile(r"&[A-Za-z_][\w.-]{0,64}=")
_PARAMETER_STARTS: Final = frozenset("?&\"'")


def _is_prose(value: str) -> bool:
    words = value.lower().split()
    return len(words) > 1 and (value[-1] in ".!?:" or not _PROSE_WORDS.isdisjoint(words))


# Documented public identifiers: shipped to browsers and apps by design, they grant nothing alone.
PUBLIC_PREFIXES: Final = (
    "pk_live_",
    "pk_test_",
    "pk.eyJ",
    "FLWPUBK",
    "sb_publishable_",
    "pub_",
    "pubkey-",
    "phc_",  # PostHog project keys: written into every page that sends events
)


def _cookie(detector: Detector, match: re.Match[str]) -> Iterable[Span]:
    """A session cookie's value, not its name: the name is what the edit tools and a reader need."""
    value = match["secret"]
    if is_placeholder(value, words=False) or char_classes(value) < 2 or is_words(value):
        return ()
    return ((match.start("secret"), match.end("secret"), detector.kind, detector.priority),)


def _cli_password(detector: Detector, match: re.Match[str]) -> Iterable[Span]:
    """`mysql -pSECRET`, `sshpass -p SECRET`, `redis-cli -a SECRET`: the value after the flag."""
    value = match["value"]
    start, end = match.span("value")
    quoted = value[:1] in "\"'"
    if quoted:
        value, start, end = value[1:-1], start + 1, end - 1
    if not _password_ok(value) or len(value) < 4:
        return ()
    return ((start, end, "password", detector.priority),)


# What may stand before a field that starts its line: an indent, a diff or list marker, a keyword
# of the shells and Dockerfiles. After anything else (`mysql --password=x app`, `INFO auth: ok`)
# the field is one word on a longer line, and its value ends at the first blank.
_LINE_START: Final = _compile(r"[ \t+-]*(?:(?:export|set|declare -x|ENV|ARG|setenv)[ \t]+)?[\"']?\Z")


def _starts_line(text: str, start: int) -> bool:
    start = _name_start(text, start)  # the field's name may be longer than the word that made it secret
    line_start = text.rfind("\n", max(0, start - 256), start) + 1
    return _LINE_START.match(text, line_start, start) is not None


def _stands_alone(match: re.Match[str], start: int) -> bool:
    """Whether an unquoted value may run to the line's end: its field starts the line, `a: b` or `a = b`.

    `NAME=value` glued is a shell's or a command's word (`PGPASSWORD=x psql -h db`): a blank ends it.
    """
    if not _starts_line(match.string, start):
        return False
    text = match.string
    op_start, op_end = match.span("op")
    glued = op_end < len(text) and text[op_end] not in " \t" and text[op_start - 1] not in " \t"
    return match["op"] != "=" or not glued


def _env_entry(detector: Detector, match: re.Match[str]) -> Iterable[Span]:
    name = match["name"]
    value = match["value"].rstrip(" \t\r")
    start = match.start("value")
    quoted = value[:1] in "\"'"
    if quoted:
        value, start = value[1:-1], start + 1
    kind = secret_field_kind(name)
    if (
        not SECRET_NAME.fullmatch(name)
        or not is_literal_secret(value, quoted=quoted, digits=kind == "password")
        or _names_itself(match, value)
    ):
        return ()
    return ((start, start + len(value), kind, detector.priority),)


def _field(detector: Detector, match: re.Match[str]) -> Iterable[Span]:
    spans = _literal_field(detector, match)
    if not spans:
        return spans
    # Only a value the rules above would mask is in doubt: most field names in tool output are
    # followed by values they turn down at once, and reading tokens costs more (about 20 us).
    group, _value_text = _value(match)
    found = _code_value(match, group)
    if found is not None:
        kind = secret_field_kind(match["name"])
        return _literals_in_code(match.string, found, kind, detector.priority)
    if _public_name(match.string, match.start()):
        return ()
    return spans


def _literal_field(detector: Detector, match: re.Match[str]) -> tuple[Span, ...]:
    """The field's value as the rules on its text alone judge it: masked whole, or not at all."""
    group, value = _value(match)
    start = match.start()
    kind = secret_field_kind(match["name"])
    digits = kind == "password"
    if start and match.string[start - 1] == ":" and match["op"] == ":":
        # `arn:aws:secretsmanager:...:secret:name`: a segment of an ARN or URN, not a field.
        return ()
    value_start = match.start(group)
    if group == "uq":
        scheme = _AUTH_SCHEME.match(value)
        if scheme is not None:
            # `auth: Bearer <token>`: the scheme is no part of the secret, as for `Authorization:`.
            value, value_start = value[scheme.end() :], value_start + scheme.end()
        # A comment after the value (`= 9476...  # why`, `: 498, // Unofficial`) is no part of it.
        value = _TRAILING_COMMENT.split(value, maxsplit=1)[0]
        value = value.rstrip(" \t").removesuffix(",")  # an item's end
        if ((" " in value or "\t" in value) and not _stands_alone(match, start)) or (
            _CODE_LINE.search(value)
            or _ANOTHER_FIELD.search(value)
            or (_NEXT_PARAMETER.search(value) and _is_parameter(match.string, start))
            or (_NEXT_ENTRY.search(value) and _is_entry(match.string, start))
            or _is_prose(value)
            or not is_literal_secret(value, quoted=False, digits=digits)
        ):
            token = _FIRST_TOKEN.match(match.string, value_start)
            if token is None or not is_literal_secret(token.group(), quoted=False, digits=digits):
                return ()
            value = token.group()
    elif (
        _is_prose(value)
        or not is_literal_secret(value, quoted=True, digits=digits)
        or _is_template(match, group, value)
        or _closes_a_string(match, group)
    ):
        return ()
    if value.startswith(PUBLIC_PREFIXES) or _names_itself(match, value):
        return ()
    end = value_start + len(value)
    return ((_equals_start(match, group, value_start), end, kind, detector.priority),)


# Frameworks that ship a variable so named to every browser, by design: its value is public.
_PUBLIC_NAME_STARTS: Final = ("NEXT_PUBLIC_", "NUXT_PUBLIC_", "EXPO_PUBLIC_")
# Where a quoted value's string goes on: an operator, or a word such as `or`, `if`, `and`.
_JOINED: Final = _compile(r"[ \t]*(?:[-+*/%|&^<>=!?@]|(?:or|and|if|else|in|is)[ \t])")
# A format's field (`{}`, `{0}`, `{name}`, `{user.id!r:>8}`): the string is a template, not a value.
_FORMAT_FIELD: Final = _compile(r"\{[A-Za-z0-9_.\[\]]*(?:[!:][^{}\n]{0,32})?\}")
_FORMAT_FIELDS: Final = _compile(r"\{[^{}\n]*\}")
# The fields of Python's `%` formatting that fill in names and numbers (`%s`, `%(name)s`, `%d`).
_PRINTF_FIELD: Final = _compile(r"%(?:\([A-Za-z_]\w{0,32}\))?[sdri]")
_PRINTF_PIECE: Final = _compile(r"[a-z0-9_./:-]*")
_QUOTE_GROUPS: Final = ("dq", "sq", "bq")


def _closes_a_string(match: re.Match[str], group: str) -> bool:
    """Whether the field is written inside a string (`"&access_token=" + self.token[...]`, a query
    being built) that the quote after its operator closes: what follows is code, not a value.

    The "value" starts with an operator that joins the string to what follows, the line before the
    field's name holds an odd number of that quote, the last not right before the name, and no
    quote closes the name (a key's own quotes: `"password": ...`, `{'(?i)password': ...}`). A value
    in quotes right after such a field (`"&password="Zx8..."`) is no join, and stays a value.
    """
    text = match.string
    if _JOINED.match(text, match.start(group)) is None:
        return False
    quote = text[match.start(group) - 1]
    name_start = _name_start(text, match.start("name"))
    before = text[text.rfind("\n", 0, name_start) + 1 : name_start]
    if before.endswith(quote) or text[match.end("name") : match.end("name") + 1] in ('"', "'", "`"):
        return False
    return (before.count(quote) - before.count("\\" + quote)) % 2 == 1


def _name_start(text: str, start: int) -> int:
    """Where the whole name holding the field's keyword starts (`s3_` of `s3_secret_access_key`)."""
    # One search in C, not a step a character: text dense with secrets asks this of every field.
    found = _NAME_BEFORE.search(text, max(0, start - _NAME_REACH), start)
    return start if found is None else found.start()


def _is_parameter(text: str, start: int) -> bool:
    """Whether the field is a query's or a form body's parameter: `?`, `&` or a quote before its name."""
    name_start = _name_start(text, start)
    return name_start > 0 and text[name_start - 1] in _PARAMETER_STARTS


def _is_entry(text: str, start: int) -> bool:
    """Whether the field is an entry of an object or a mapping on one line: `{` or `,` before its name."""
    before = text[max(0, _name_start(text, start) - 8) : _name_start(text, start)].rstrip(" \t\"'")
    return before.endswith(("{", ","))


_NAME_REACH: Final = 64
_NAME_BEFORE: Final = _compile(r"[A-Za-z0-9_.-]{1,64}\Z")
_NAME_AFTER: Final = _compile(r"[A-Za-z0-9_.-]{0,64}")


def _public_name(text: str, start: int) -> bool:
    """Whether the field's whole name says its value is public: a framework ships it to browsers
    (`NEXT_PUBLIC_..._KEY`), or a protocol sends it in the clear (`Sec-WebSocket-Key`, a nonce)."""
    start = _name_start(text, start)
    if text.startswith(_PUBLIC_NAME_STARTS, start):
        return True
    found = _NAME_AFTER.match(text, start, start + _LONGEST_CLEAR_HEADER + 1)
    return found is not None and found.group().lower().replace("_", "-") in _CLEAR_HEADERS


# Headers whose "key" is a handshake's nonce or its answer, public by design (RFC 6455, 4.1 and 4.2.2).
_CLEAR_HEADERS: Final = frozenset({"sec-websocket-key", "sec-websocket-accept"})
_LONGEST_CLEAR_HEADER: Final = max(map(len, _CLEAR_HEADERS))


def _names_itself(match: re.Match[str], value: str) -> bool:
    """Whether `value` is its field's whole name again (`s3_secret_access_key = 's3-secret-access-key'`):
    a stand-in that says what goes there. A secret is never its own name."""
    name = match.string[_name_start(match.string, match.start("name")) : match.end("name")]
    return _NAME_NOISE.sub("", value).lower() == _NAME_NOISE.sub("", name).lower()


_NAME_NOISE: Final = _compile(r"[^A-Za-z0-9]+")


def _code_value(match: re.Match[str], group: str) -> Expression | None:
    """The field's value as an expression, where it may be one; None: a literal, judged as before.

    The tokens are read only where a value is in doubt: an unquoted one with a blank or an operator
    character in it, or a quoted one that an operator or a keyword follows. A value alone on its
    line (most of JSON, YAML, .env) is never tokenized.
    """
    text = match.string
    value_start = match.start(group)
    if group == "uq":
        value = match.group(group)
        if _assignment_line(match, group):
            # `DB_PASSWORD=aabcd.f0` alone on its line: a .env, INI or properties entry, whose value
            # is a literal whatever it looks like; code spaces its `=` or goes on (`,`, `)`).
            return None
        name = _IDENTIFIER.match(value)
        # A name mixing both cases and digits (`Xk9mQ2pLzR4t`) may be a secret in a URL or a shell.
        if name is not None and (
            (char_classes(name.group()) < 3 and _names_a_value(match, value_start + name.end()))
            or (_WORD_PARTS.fullmatch(name.group()) and _item_in_code(match, value_start + name.end()))
        ):
            return Expression(())
        if value.isalnum() and _JOINED.match(text, match.end(group)) is None:
            return None
        return code.expression(text, value_start)
    if group not in _QUOTE_GROUPS or _JOINED.match(text, match.end(group) + 1) is None:
        return None
    quote = value_start - 1
    while quote > 0 and value_start - quote <= 3 and text[quote - 1] in "bBrRuUfF":
        quote -= 1
    return code.expression(text, quote)


_TRAILING_COMMENT: Final = _compile(r"[ \t]+(?:#|//)[ \t]")
# `{file:!0,password:!0,image:!0}` (minified JavaScript), `{user:ada,password:x9Kq2mW7,port:5432}`
# (a flow mapping): a comma and a name with its colon start the next entry, never a value's rest.
_NEXT_ENTRY: Final = _compile(r",[ \t]*[A-Za-z_$][\w$]{0,64}[ \t]*:")
_IDENTIFIER: Final = _compile(r"[A-Za-z_][A-Za-z0-9_]*")
# A name of two words or more, a word ending in digits at most (`pkcs1_key`, `imdsv2_session_token`,
# `_convert_oauth2_credentials`): no generated value reads so.
_WORD_PARTS: Final = _compile(r"_?[A-Za-z]{2,}[0-9]*(?:_[A-Za-z]{2,}[0-9]*)+_?")
# What ends an item of a literal or a call in code.
_ITEM_ENDS: Final = frozenset(",)]}")
_COMPARISONS: Final = frozenset({"==", "===", "!="})


def _assignment_line(match: re.Match[str], group: str) -> bool:
    """Whether the field is an entry alone on its line: `NAME=value` with nothing around the `=` (a
    .env, INI or properties entry) or `name: value` (YAML), its value one token with nothing after
    it. Formatted code spaces its `=`, and goes on after a value (`,`, `)`, an operator)."""
    text = match.string
    op_start, op_end = match.span("op")
    if op_start == 0 or text[op_start - 1] in " \t":
        return False
    if match["op"] == "=":
        if op_end != match.start(group):
            return False
    elif (
        match["op"] != ":"
        or text[op_end : match.start(group)].strip(" ") != ""
        or op_end == match.start(group)
    ):
        return False
    line_start = text.rfind("\n", 0, match.start()) + 1
    # The rest of the name before the part the pattern matched (`DB_` of `DB_PASSWORD`).
    before = text[line_start : match.start()].rstrip(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-"
    )
    if before.strip(" \t") not in ("", "export"):
        return False  # inside a line of code or a command (`f(password=x.y)`, `run --password=...`)
    end = match.end(group)
    stop = text.find("\n", end)  # not `"\n" in text[end:]`: a copy of the rest of the text a call
    rest = text[end : len(text) if stop == -1 else stop]
    value = match.group(group).rstrip(" \t\r")
    # One token: `A | B` after `name:` is a type annotation, not a YAML string.
    # A `,` or `\` at the end: the next argument, or the line goes on (`proxy_auth=None,\`).
    ends_an_item = value.endswith((",", "\\"))
    return rest.strip(" \t\r") == "" and " " not in value and "\t" not in value and not ends_an_item


def _names_a_value(match: re.Match[str], name_end: int) -> bool:
    """Whether the identifier that starts the value and ends at `name_end` is a name in code.

    Two places say so: a keyword argument (`gss_auth=UseGSSAPI,`: `=` glued, then `,` or `)`)
    and the side of a comparison (`password == provided_password:`), where a literal would be quoted.
    """
    text = match.string
    op_start, op_end = match.span("op")
    after = text[name_end : name_end + 1]
    # `,` then a blank or the line's end: the next argument; `abc,def|g1` is one password.
    next_item = after == ")" or (
        after == "," and text[name_end + 1 : name_end + 2] in ("", " ", "\t", "\n", "\r", "\\")
    )
    if match["op"] == "=" and op_end == match.start("uq") and next_item:
        return True
    spaced = op_start > 0 and text[op_start - 1] in " \t"
    return match["op"] in _COMPARISONS and spaced and after in ("", ":", ")", " ", "\n", "\r", ",")


def _item_in_code(match: re.Match[str], name_end: int) -> bool:
    """Whether the value is an item of a map, a list or a call in code (`{"...-token": name}`,
    `key: name,`), or is assigned to a quoted key (`d["privateKey"] = name`): no file of settings
    writes a key in quotes and leaves its value bare, or ends a value with a bracket."""
    text = match.string
    if text[name_end : name_end + 1] in _ITEM_ENDS:
        return True
    quoted_name = text[match.end("name") : match.end("name") + 1] in ('"', "'")
    rest = text[name_end : name_end + _NAME_REACH].split("\n", 1)[0]
    return quoted_name and rest.strip(" \t\r") == ""


def _literals_in_code(text: str, found: Expression, kind: str, priority: int) -> list[Span]:
    """In a value that is code, the string literals that are secrets alone (`"Zx8...Pa" + suffix`)."""
    return [(start, end, kind, priority) for start, end in found.strings if looks_random(text[start:end])]


def _is_template(match: re.Match[str], group: str, value: str) -> bool:
    """A format string (`f"deploy with token {SECRET}"`, `"{user}:{password}"`, `'%s/%s/aws4_request'
    % (...)`): its fields are filled from names; no piece left between them is a secret alone."""
    if "%" in value and len(_PRINTF_FIELD.findall(value)) >= 2:
        # Two fields at least, and between them only lower-case words, digits and path marks
        # (`/aws4_request`): `%s` is two characters a generated password may hold, and such a
        # password holds capitals or other symbols besides.
        return all(_PRINTF_PIECE.fullmatch(piece) for piece in _PRINTF_FIELD.split(value))
    if "{" not in value:
        return False
    text = match.string
    quote = match.start(group) - 1
    prefix = quote
    while prefix > 0 and quote - prefix < 2 and text[prefix - 1] in "bBrRuUfF":
        prefix -= 1
    f_string = "f" in text[prefix:quote].lower() and (prefix == 0 or text[prefix - 1] not in _NAME_CHARS)
    if not f_string and _FORMAT_FIELD.search(value) is None:
        return False
    return not any(looks_random(piece) for piece in _FORMAT_FIELDS.split(value))


def _equals_start(match: re.Match[str], group: str, value_start: int) -> int:
    """Where a value glued to `==` or `===` starts: after the first `=` (`PASSWORD==x` holds `=x`).

    `=` is in passwords too; glued to the name and to the value, the rest of the run is no
    comparison (`a == b` has blanks). The value was judged without it, so nothing more is masked
    than what was masked before, and nothing of the secret is left visible.
    """
    if group != "uq" or match["op"] not in ("==", "==="):
        return value_start
    op_start, op_end = match.span("op")
    if op_end != value_start or match.string[op_start - 1] in " \t":
        return value_start
    return op_start + 1


# Names ending in `_key` that are not secrets: database, cache and storage keys, public keys.
_NOT_SECRET_KEYS: Final = frozenset(
    {
        "primary",
        "foreign",
        "sort",
        "partition",
        "cache",
        "object",
        "idempotency",
        "routing",
        "lookup",
        "row",
        "unique",
        "index",
        "group",
        "hot",
        "public",
        "pub",
        "kms",
        "gpg",
        "pgp",
        "ssh",
        "dict",
        "map",
        "hash",
        "composite",
        "natural",
        "surrogate",
        "candidate",
        "cluster",
        "shard",
        "bucket",
        "s3",
        "file",
        "config",
        "setting",
        "translation",
        "i18n",
        "message",
        "msg",
        "event",
        "metric",
        "label",
        "field",
        "column",
        "table",
        "node",
        "item",
        "entry",
        "record",
        "user",
        "tenant",
        "session",
        "request",
        "dedup",
        "dedupe",
        "lock",
        "queue",
        "topic",
        "stream",
        "storage",
        "state",
        "store",
        "registry",
        "env",
        "region",
        "zone",
    }
)
_NAME_CHARS: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")


def _key_field(detector: Detector, match: re.Match[str]) -> Iterable[Span]:
    """`SOMETHING_KEY = value`: a secret when the value is random-looking and the name is not a DB key."""
    group, value = _value(match)
    if value.startswith(PUBLIC_PREFIXES) or _names_itself(match, value):
        return ()
    if not is_literal_secret(value, quoted=group != "uq") or not looks_random(value):
        return ()
    found = _code_value(match, group)
    if found is not None:
        return _literals_in_code(match.string, found, "api_key", detector.priority)
    text = match.string
    words = re.split(r"[_.-]+", text[_name_start(text, match.start()) : match.start()].lower())
    if words[-1] in _NOT_SECRET_KEYS or _public_name(text, match.start()):
        return ()
    return ((match.start(group), match.end(group), "api_key", detector.priority),)


def _app_setting(detector: Detector, match: re.Match[str]) -> Iterable[Span]:
    """.NET `<add key="ApiKey" value="..."/>`: the name is in one attribute, the secret in the next."""
    name = match["name"]
    kind = secret_field_kind(name)
    if not SECRET_NAME.fullmatch(name) or not is_literal_secret(
        match["value"], quoted=True, digits=kind == "password"
    ):
        return ()
    return ((match.start("value"), match.end("value"), kind, detector.priority),)


def _flag(detector: Detector, match: re.Match[str]) -> Iterable[Span]:
    value = match["value"]
    quoted = value[:1] in "\"'"
    start, end = match.span("value")
    if quoted:
        value, start, end = value[1:-1], start + 1, end - 1
    kind = secret_field_kind(match["name"])
    if not is_literal_secret(value, quoted=quoted, digits=kind == "password"):
        return ()
    return ((start, end, kind, detector.priority),)


def _netrc(detector: Detector, match: re.Match[str]) -> Iterable[Span]:
    if not _password_ok(match["secret"]):
        return ()
    return ((match.start("secret"), match.end("secret"), "password", detector.priority),)


def _authorization(detector: Detector, match: re.Match[str]) -> Iterable[Span]:
    value = match["secret"]
    scheme = match["scheme"]
    if is_placeholder(value):
        return ()
    if scheme and scheme.lower() == "basic" and _sample_basic(value):
        return ()
    if scheme:
        # A scheme says a credential follows; a word after it is prose ("Bearer authentication").
        ok = len(value) >= 8 and char_classes(value) >= 2 and not is_words(value)
    else:
        ok = looks_random(value)
    if not ok:
        return ()
    return ((match.start("secret"), match.end("secret"), "authorization", detector.priority),)


# Hosts that no one's real service runs at: this machine, and the names reserved for examples
# (RFC 2606, RFC 6761), with a port or not.
_SAMPLE_HOST: Final = _compile(
    r"(?i:localhost|127\.0\.0\.1|\[::1\]|(?:[\w-]+\.)*(?:example|test|invalid|localhost)"
    r"|(?:[\w-]+\.)*example\.(?:com|org|net))(?::\d{1,5})?"
)
_SAMPLE_PASSWORD: Final = _compile(r"[a-z_]{1,16}")
# Under 6 characters, of one kind: lower-case letters or digits. One with a capital, a symbol, or
# both letters and digits is masked (`b!&*$`, `Zx9q`).
_GUESSED_SHORT: Final = _compile(r"[a-z]{1,5}|[0-9]{1,5}")
# A password in lower-case letters that says what it is (`mysecret`, `clearpassword`): a stand-in.
_SELF_NAMED: Final = _compile(r"[a-z_]{0,16}(?:password|secret)[a-z_]{0,16}")


def _sample_basic(value: str) -> bool:
    """Basic credentials that decode to test data's `user:pass` (`Zm9vOmJhcg==` is `foo:bar`)."""
    try:
        decoded = base64.b64decode(value, validate=True).decode("ascii")
    except (binascii.Error, ValueError):
        return False
    return is_sample_pair(decoded)


def _url_password(detector: Detector, match: re.Match[str]) -> Iterable[Span]:
    secret = match["secret"]
    if not _password_ok(secret) or secret == match["user"]:
        # A password that repeats its user (`guest:guest`, `postgres:postgres`) is the first anyone
        # tries, at any host: a mask over it hides nothing.
        return ()
    if _GUESSED_SHORT.fullmatch(unquote(secret)):
        # A short word or number (`:bosco@`, `nkim:1234@`): left alone as the same value is under a
        # secret-named field (`is_literal_secret`, under 6 characters).
        return ()
    host = match.groupdict().get("host")
    if host is not None and _SAMPLE_HOST.fullmatch(host) and _SAMPLE_PASSWORD.fullmatch(secret):
        # `mysql://scott:tigress@localhost/foo`: a documented default at no real host. A password
        # with a digit or a capital there is masked all the same.
        return ()
    if _SELF_NAMED.fullmatch(secret):
        return ()
    return ((match.start("secret"), match.end("secret"), detector.kind, detector.priority),)


# ---------------------------------------------------------------------------------------------
# Field names that say "secret". The long names may sit inside a longer one (`dbpassword`,
# `authtoken`); the short ones must start a word (`pass` in `DB_PASS`, not in `bypass`).

_KEY_QUALIFIERS: Final = (
    "api",
    "access",
    "private",
    "signing",
    "encryption",
    "master",
    "account",
    "app",
    "client",
    "consumer",
    "shared",
    "webhook",
    "license",
    "admin",
    "deploy",
    "bot",
    "service",
    "subscription",
    "secret",
    "auth",
)
_LONG_NAMES: Final = (
    r"passw(?:or)?d|passphrase|secret|token|credentials?|"
    r"(?:" + "|".join(_KEY_QUALIFIERS) + r")[_.-]?key"
)
_SHORT_NAMES: Final = r"pass|pwd|pw|auth|creds?"
_SUFFIX: Final = (
    # Up to two words (`SECRET_KEY_BASE`, `client-key-data`); `base64` before `base`, as `re` takes
    # the first alternative that fits.
    r"(?:[_.-]?(?i:key|value|hash|str|string|b64|base64|base|hex|plain|text|data|secret|token)){0,2}"
    r"(?i:s)?(?:[_-]?\d{1,2})?"
)
# `password: str = "..."`: a type annotation between the name and the ` = ` (blanks required, or
# the value of `password: ab=cd` would pass for an annotation).
_ANNOTATION: Final = (
    r"(?:[ \t]*:[ \t]*[A-Za-z_][\w.]*(?:\[[^\]\n]{0,40}\])?"
    r"(?:[ \t]*\|[ \t]*[A-Za-z_][\w.]*)*(?=[ \t]+=[^=]))?"
)
# Values shorter than six characters, and unquoted names of code (`settings.KEY`, `self.token`),
# are never secrets (see `is_literal_secret`); the pattern turns them down itself, as most field
# names in tool output are followed by just such values and a call per value would cost more.
_CODE_OWNERS: Final = r"(?!(?:os|self|this|cls|settings|config|conf|env|process|request|ctx|options|args)\.)"
_VALUE: Final = (
    r"""(?:[bBrRuUfF]{1,2}(?=["']))?(?:"(?P<dq>[^"\s]{6,512}+)"|'(?P<sq>[^'\s]{6,512}+)'"""
    r"""|`(?P<bq>[^`\s]{6,512}+)`|\\"(?P<eq>[^"\s\\]{6,512}+)\\\""""
    r"""|""" + _CODE_OWNERS + r"""(?P<uq>[^\s"'`,;&|<>(){}\[\]\\]{6,512}+)(?![(\[]))"""
)
# Under a secret name the value is whole: a quoted one with its blanks (a pass phrase), an unquoted
# one to the end of the line (`&`, `,` and `|` are in passwords too), a `;` (a statement's end, a
# connection string's next field) or a bracket (code: a call, an index); `_field` falls back to the
# first token where the rest is code or a message.
_WHOLE_VALUE: Final = (
    r"""(?:[bBrRuUfF]{1,2}(?=["']))?(?:"(?P<dq>[^"\n]{6,512}+)"|'(?P<sq>[^'\n]{6,512}+)'"""
    r"""|`(?P<bq>[^`\n]{6,512}+)`|\\"(?P<eq>[^"\\\n]{6,512}+)\\\""""
    r"""|""" + _CODE_OWNERS + r"""(?P<uq>[^\s"'`,;&|<>(){}\[\]\\][^\n\r;"'`(){}\[\]]{5,511}+)(?![(\[]))"""
)


def _assigned(value: str) -> str:
    return _CLOSE + _ANNOTATION + r"[ \t]{0,4}" + _OP + r"[ \t]{0,8}" + value + r"|>(?P<xv>[^<\s]{6,512}+)</"


_ASSIGNED: Final = _assigned(_VALUE)
_ASSIGNED_WHOLE: Final = _assigned(_WHOLE_VALUE)
_FIELD: Final = (
    r"(?P<name>(?i:"
    + _LONG_NAMES
    + r")|(?:(?<![A-Za-z])|(?=[A-Z]))(?i:"
    + _SHORT_NAMES
    + r"))"
    + _SUFFIX
    + r"(?:"
    + _ASSIGNED_WHOLE
    + r")"
)
SECRET_NAME: Final = _compile(
    r"[\w.-]{0,64}?(?:(?i:"
    + _LONG_NAMES
    + r")|(?:(?<![A-Za-z])|(?=[A-Z]))(?i:"
    + _SHORT_NAMES
    + r"))"
    + _SUFFIX
)
"""Matches (whole) a field name that says its value is a secret: `db_password`, `apiKey`, `auth_token`."""

# Keywords are a field name with what may follow it, so `PASSED`, `Author:`, `tokenizer`,
# `token_ttl` and `password reset` never wake the field detector: a closing quote or bracket,
# an operator (after blanks, too), or the start of a suffix (`_key`, `Value`, `s`, `2`).
_NAME_ENDINGS: Final = (
    *"\"'`]\\=:?|>",
    *(blank * count + operator for blank in " \t" for count in (1, 2, 3, 4) for operator in "=:?|"),
)
_SUFFIX_STARTS: Final = ("ke", "va", "ha", "se", "to", "st", "da", "b6", "ba", "he", "pl", "te")


def _followed(names: Sequence[str]) -> tuple[str, ...]:
    followers = (
        *_NAME_ENDINGS,
        *(f"s{ending}" for ending in _NAME_ENDINGS),
        *(f"{sep}{start}" for sep in ("", "_", "-", ".") for start in _SUFFIX_STARTS),
        *(f"{sep}{digit}" for sep in ("", "_", "-") for digit in "0123456789"),
    )
    return tuple(dict.fromkeys(name + follower for name in names for follower in followers))


_FIELD_NAMES: Final = (
    "password",
    "passwd",
    "passphrase",
    "pass",
    "pwd",
    "pw",
    "secret",
    "token",
    "credential",
    "cred",
    "auth",
    *(
        qualifier + separator + "key"
        for qualifier in _KEY_QUALIFIERS
        if qualifier not in ("secret", "auth")
        for separator in ("", "_", "-", ".")
    ),
)
_FIELD_KEYWORDS: Final = _followed(_FIELD_NAMES)
_KEY_FIELD: Final = r"(?<=[A-Za-z0-9])[_.-](?P<name>(?i:key))(?i:s)?(?:[_-]?\d{1,2})?(?:" + _ASSIGNED + r")"


def _datadog_keywords() -> tuple[str, ...]:
    return tuple(
        f"{product}{sep}{kind}{sep2}key"
        for product in ("dd", "datadog")
        for sep in "_-"
        for kind in ("api", "app", "application")
        for sep2 in "_-"
    )


DETECTORS: Final[tuple[Detector, ...]] = (
    # --- Private keys: the whole block, body included.
    Detector(
        "private_key",
        ("-----begin", "---- begin"),
        _compile(r"-{4,5} ?BEGIN[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)? ?-{4,5}"),
        finish=_pem_block,
    ),
    Detector(
        "private_key", ("putty-user-key-file-",), _compile(r"PuTTY-User-Key-File-\d+:"), finish=_putty_block
    ),
    Detector(
        "private_key",
        ("ls0tls1crudjtib",),
        _compile(_LU + r"LS0tLS1CRUdJTi[A-Za-z0-9+/]{20,}+={0,2}"),
        finish=_base64_pem,
    ),
    # A key body without its armour: no keyword, found by its shape.
    Detector(
        "private_key",
        (),
        _KEY_BODY,
        CONTEXT,
        scan=True,
        min_length=129,
        finish=_key_body,
        find=_find_key_bodies,
    ),
    _prefixed(
        "age_secret_key", ("age-secret-key-1",), r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}"
    ),
    # --- Cloud: AWS, Google Cloud, Azure, Alibaba, DigitalOcean.
    Detector(
        "aws_access_key_id",
        ("akia", "asia", "abia", "acca", "a3t"),
        _compile(
            _L
            + r"(?P<id>(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z2-7]{16})"
            + _R
            + r"(?:(?:[ \t]*[,:;|][ \t]*|[ \t]+)(?P<pair>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=]))?"
        ),
        finish=_aws_key_id,
    ),
    Detector(
        "aws_secret_access_key",
        (
            "secret_access_key",
            "secretaccesskey",
            "secret-access-key",
            "secret access key",
            "aws_secret",
            "aws-secret",
            "awssecret",
        ),
        _compile(
            r"(?i:(?:aws[_-]?)?secret[ _-]?access[ _-]?key|aws[_-]?secret(?:[_-]?key)?)"
            + _CLOSE
            + r"[ \t]*(?:\[[^\]\n]{0,32}\][ \t]*)?(?:"
            + _OP
            + r"|,)[ \t]*"
            + _OPEN
            + r"(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"
        ),
        CONTEXT,
        check=lambda value: char_classes(value) >= 2 and _token_ok(value),
    ),
    Detector(
        "aws_session_token",
        ("x-amz-security-token=",),
        _compile(r"(?i:X-Amz-Security-Token)=(?P<secret>[A-Za-z0-9%_.~+/=-]{16,}+)"),
        CONTEXT,
        check=_token_ok,
    ),
    Detector(
        "signed_url_signature",
        ("x-amz-signature=", "x-goog-signature="),
        _compile(r"(?i:X-(?:Amz|Goog)-Signature)=(?P<secret>[0-9a-fA-F]{64,}+)"),
        CONTEXT,
        check=_token_ok,
    ),
    _prefixed("google_api_key", ("aiza",), _LUD + r"AIza[0-9A-Za-z_-]{35}" + _RUD),
    _prefixed("google_oauth_client_secret", ("gocspx-",), _LUD + r"GOCSPX-[A-Za-z0-9_-]{24,32}+" + _RUD),
    _prefixed("google_oauth_token", ("ya29.",), _LUD + r"ya29\.[0-9A-Za-z_-]{20,}+", check=_random_token_ok),
    _prefixed(
        "google_oauth_token", ("1//0",), r"(?<![A-Za-z0-9_/-])1//0[0-9A-Za-z_-]{40,}+", check=_random_token_ok
    ),
    Detector(
        "azure_storage_key",
        ("accountkey",),
        _compile(r"(?i:AccountKey)[ \t]*=[ \t]*(?P<secret>[A-Za-z0-9+/]{40,100}={0,2})(?![A-Za-z0-9+/=])"),
        CONTEXT,
        check=_token_ok,
    ),
    Detector(
        "azure_shared_access_key",
        ("sharedaccesskey",),
        _compile(
            r"(?i:SharedAccessKey)[ \t]*=[ \t]*(?P<secret>[A-Za-z0-9+/]{40,50}={0,2})(?![A-Za-z0-9+/=])"
        ),
        CONTEXT,
        check=_token_ok,
    ),
    # A URL's query parameter that carries a key (`?key=`, an Azure Function's `?code=`, a signed
    # URL's `signature=`): masked where the value reads as generated, whatever the service.
    Detector(
        "url_key",
        ("key=", "code=", "signature=", "apikey=", "secret="),
        _compile(r"(?<=[?&;])(?i:key|code|signature|apikey|secret)=(?P<secret>[A-Za-z0-9%_.~+/=-]{16,}+)"),
        CONTEXT,
        check=lambda value: looks_random(value) and _token_ok(value),
    ),
    Detector(
        "azure_sas_signature",
        ("sig=",),
        _compile(r"(?<=[?&;])sig=(?P<secret>[A-Za-z0-9%+/=]{16,}+)"),
        CONTEXT,
        check=_token_ok,
    ),
    _prefixed(
        "azure_client_secret",
        ("q~",),
        r"(?<![A-Za-z0-9_~.-])[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.-]{31,34}(?![A-Za-z0-9_~.-])",
        back=4,
        check=_random_token_ok,
    ),
    _prefixed(
        "alibaba_access_key_id", ("ltai",), _L + r"LTAI[A-Za-z0-9]{12,20}" + _R, check=_random_token_ok
    ),
    _prefixed("digitalocean_token", ("dop_v1_", "doo_v1_", "dor_v1_"), _LU + r"do[opr]_v1_[a-f0-9]{64}" + _R),
    # --- Code hosts.
    _prefixed(
        "github_token",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
        _LU + r"gh[pousr]_[A-Za-z0-9]{36,251}+" + _RU,
    ),
    _prefixed(
        "github_token",
        ("github_pat_",),
        _LU + r"github_pat_[A-Za-z0-9_]{22,255}+" + _R,
        check=_random_token_ok,
    ),
    _prefixed(
        "gitlab_token",
        tuple(
            f"gl{kind}-"
            for kind in (
                "pat",
                "dt",
                "rt",
                "rtr",
                "ptt",
                "cbt",
                "imt",
                "agent",
                "oas",
                "soat",
                "ft",
                "ffct",
                "wt",
                "sst",
            )
        ),
        _LUD + r"gl(?:pat|dt|rtr?|ptt|cbt|imt|agent|oas|soat|ft|ffct|wt|sst)-[A-Za-z0-9_-]{20,}+"
        r"(?:\.[A-Za-z0-9_-]+)*+",
        check=_random_token_ok,
    ),
    _prefixed("gitlab_token", ("gr1348941",), _L + r"GR1348941[A-Za-z0-9_-]{20,}+", check=_random_token_ok),
    _prefixed("bitbucket_app_password", ("atbb",), _L + r"ATBB[A-Za-z0-9_=-]{28,}+", check=_random_token_ok),
    _prefixed(
        "atlassian_api_token",
        ("atatt3", "atctt3"),
        _L + r"AT[AC]TT3[A-Za-z0-9_=-]{30,}+",
        check=_random_token_ok,
    ),
    # --- Package registries and CI.
    _prefixed("pypi_token", ("pypi-ag",), _LUD + r"pypi-Ag[A-Za-z0-9_-]{50,}+"),
    _prefixed("npm_token", ("npm_",), _LU + r"npm_[A-Za-z0-9]{36}" + _R, check=_random_token_ok),
    _prefixed("rubygems_token", ("rubygems_",), _LU + r"rubygems_[a-f0-9]{48}" + _R),
    _prefixed("nuget_api_key", ("oy2",), _L + r"oy2[a-z0-9]{43}" + _R, check=_random_token_ok),
    _prefixed("dockerhub_token", ("dckr_pat_", "dckr_oat_"), _LU + r"dckr_(?:pat|oat)_[A-Za-z0-9_-]{27,}+"),
    _prefixed("artifactory_token", ("akcp",), _L + r"AKCp[A-Za-z0-9]{64,80}+" + _R),
    _prefixed("pulumi_token", ("pul-",), _LUD + r"pul-[a-f0-9]{40}" + _R),
    _prefixed(
        "terraform_token", ("atlasv1",), _L + r"[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,}+", back=15
    ),
    _prefixed(
        "vault_token",
        ("hvs.", "hvb.", "hvr."),
        _LUD + r"hv[sbr]\.[A-Za-z0-9_-]{24,}+",
        check=_random_token_ok,
    ),
    _prefixed(
        "doppler_token",
        ("dp.pt.", "dp.st.", "dp.sa.", "dp.ct.", "dp.scim.", "dp.audit."),
        _LU + r"dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9_-]{40,}+",
        check=_random_token_ok,
    ),
    # --- Chat and SaaS.
    _prefixed(
        "slack_token",
        ("xox",),
        r"(?<![A-Za-z0-9-])xox(?:e\.xox)?[abeoprs]-[A-Za-z0-9-]{10,}+",
        check=_random_token_ok,
    ),
    _prefixed(
        "slack_token", ("xapp-",), r"(?<![A-Za-z0-9-])xapp-\d-[A-Za-z0-9-]{10,}+", check=_random_token_ok
    ),
    Detector(
        "slack_webhook_url",
        ("hooks.slack.com/",),
        _compile(r"hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/+-]{16,}+"),
        finish=_whole_url,
    ),
    Detector(
        "teams_webhook_url",
        ("webhook.office.com/", "outlook.office.com/webhook/", "outlook.office365.com/webhook/"),
        _compile(
            r"(?:webhook\.office\.com/webhookb2|outlook\.office(?:365)?\.com/webhook)/"
            r"[0-9a-fA-F-]{36}@[0-9a-fA-F-]{36}/IncomingWebhook/[0-9a-fA-F]{32}/[0-9a-fA-F-]{36}"
            r"(?:/[A-Za-z0-9_-]{8,}+)?"
        ),
        finish=_whole_url,
    ),
    # Any service's webhook: a path under `webhook(s)` or `hooks` whose last segment reads as
    # generated (`/hooks/catch/123/ab12Cd`, `/webhook/3f2a...`) carries its own secret.
    Detector(
        "webhook_url",
        ("/webhook/", "/webhooks/", "/hooks/"),
        _compile(
            r"/(?:webhooks?|hooks)/(?:[A-Za-z0-9_.-]{1,64}/){0,4}(?P<secret>[A-Za-z0-9_-]{20,128}+)(?![A-Za-z0-9_.-])"
        ),
        CONTEXT,
        check=lambda value: looks_random(value, min_length=20) and not is_placeholder(value),
    ),
    Detector(
        "discord_webhook_url",
        ("discord.com/api/", "discordapp.com/api/"),
        _compile(r"discord(?:app)?\.com/api/(?:v\d+/)?webhooks/\d{5,30}/[A-Za-z0-9_-]{20,}+"),
        finish=_whole_url,
    ),
    # Bot tokens carry no keyword: the scan finds the literal dot of `id.timestamp.hmac`. Telegram's
    # `id:AA...` is found by its colon and capital A (`:a` once lower-cased), its id looked up after.
    Detector(
        "discord_bot_token",
        (),
        _compile(r"\.[A-Za-z0-9_-]{6,7}\.[A-Za-z0-9_-]{27,40}(?![A-Za-z0-9_.-])"),
        PROVIDER,
        scan=True,
        min_length=35,
        finish=lambda detector, match: _with_head(detector, match, _DISCORD_ID),
    ),
    Detector(
        "telegram_bot_token",
        (":a",),
        _compile(r":A[A-Za-z0-9_-]{34}(?![A-Za-z0-9_-])"),
        PROVIDER,
        finish=lambda detector, match: _with_head(detector, match, _TELEGRAM_ID),
    ),
    _prefixed(
        "stripe_key",
        ("sk_live_", "sk_test_", "rk_live_", "rk_test_"),
        _LU + r"[sr]k_(?:live|test)_[A-Za-z0-9]{10,247}+" + _RU,
        check=_random_token_ok,
    ),
    _prefixed(
        "stripe_webhook_secret", ("whsec_",), _LU + r"whsec_[A-Za-z0-9+/=]{24,}+", check=_random_token_ok
    ),
    _prefixed("twilio_api_key", tuple(f"sk{digit}" for digit in _HEX_DIGITS), _L + r"SK[0-9a-fA-F]{32}" + _R),
    # `ac` and a hex digit is too common in lower-cased text (`replace`, `trace`) for a keyword:
    # a scan. Its look-behind follows the literal, or `re` could not skip ahead to the literal.
    Detector(
        "twilio_account_sid",
        (),
        _compile(r"AC(?<![A-Za-z0-9]AC)[0-9a-fA-F]{32}" + _R),
        scan=True,
        min_length=34,
        check=_token_ok,
    ),
    _prefixed(
        "sendgrid_api_key",
        ("sg.",),
        _LUD + r"SG\.[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{16,64}" + _RUD,
        check=_random_token_ok,
    ),
    _prefixed(
        "mailgun_api_key",
        tuple(f"key-{digit}" for digit in _HEX_DIGITS),
        _LUD + r"key-[0-9a-f]{32}" + _R,
    ),
    Detector(
        "mailgun_api_key",
        ("mailgun",),
        _compile(_L + r"[0-9a-f]{32}-[0-9a-f]{8}-[0-9a-f]{8}(?![A-Za-z0-9-])"),
        CONTEXT,
        window=256,
        check=_token_ok,
    ),
    _prefixed("mailchimp_api_key", ("-us",), _L + r"[0-9a-f]{32}-us\d{1,2}" + _R, back=32),
    _prefixed(
        "shopify_token",
        ("shpat_", "shpca_", "shppa_", "shpss_"),
        _L + r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}" + _R,
    ),
    Detector(
        "datadog_api_key",
        _datadog_keywords(),
        _compile(
            r"(?P<name>(?i:(?:dd|datadog)[_-](?:api|app|application)[_-]key))"
            + _CLOSE
            + r"[ \t]*"
            + _OP
            + r"[ \t]*"
            + _OPEN
            + r"(?P<secret>[a-f0-9]{32}(?:[a-f0-9]{8})?)"
            + _R
        ),
        CONTEXT,
        finish=_datadog,
    ),
    _prefixed(
        "sentry_token",
        ("sntrys_", "sntryu_"),
        _LU + r"(?:sntrys_eyJ[A-Za-z0-9+/=_-]{50,}+|sntryu_[a-f0-9]{64}" + _R + ")",
    ),
    _prefixed("databricks_token", ("dapi",), _L + r"dapi[a-f0-9]{32}(?:-\d)?" + _R),
    _prefixed(
        "grafana_token",
        ("glc_", "glsa_"),
        _LU + r"(?:glc_[A-Za-z0-9+/]{32,}+={0,2}|glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}" + _R + ")",
        check=_random_token_ok,
    ),
    _prefixed("linear_api_key", ("lin_api_",), _LU + r"lin_api_[A-Za-z0-9]{40}" + _R, check=_random_token_ok),
    _prefixed("notion_token", ("ntn_",), _LU + r"ntn_[0-9]{11}[A-Za-z0-9]{35}" + _R),
    _prefixed("postman_api_key", ("pmak-",), _L + r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}" + _R),
    _prefixed("newrelic_key", ("nrak-", "nrjs-"), _L + r"(?:NRAK-[A-Z0-9]{27}|NRJS-[a-f0-9]{19})" + _R),
    _prefixed("dynatrace_token", ("dt0c01.",), _L + r"dt0c01\.[A-Z0-9]{24}\.[A-Z0-9]{64}" + _R),
    _prefixed("contentful_token", ("cfpat-",), _L + r"CFPAT-[A-Za-z0-9_-]{43}" + _RUD),
    _prefixed("cloudflare_origin_ca_key", ("v1.0-",), _L + r"v1\.0-[a-f0-9]{24}-[a-f0-9]{146}" + _R),
    _prefixed(
        "supabase_token",
        ("sbp_", "sb_secret_"),
        _LU + r"(?:sbp_[a-f0-9]{40}" + _R + r"|sb_secret_[A-Za-z0-9_-]{20,}+)",
        check=_random_token_ok,
    ),
    _prefixed("figma_token", ("figd_",), _LU + r"figd_[A-Za-z0-9_-]{40,}+", check=_random_token_ok),
    _prefixed("heroku_api_key", ("hrku-",), _L + r"HRKU-[A-Za-z0-9_-]{20,}+", check=_random_token_ok),
    _prefixed(
        "tailscale_key",
        ("tskey-",),
        _L + r"tskey-(?:api|auth|client|webhook|scim)-[A-Za-z0-9]{6,}-[A-Za-z0-9]{16,}+" + _R,
    ),
    _prefixed("mapbox_secret_token", ("sk.eyj",), _L + r"sk\.eyJ[A-Za-z0-9_-]{20,}+\.[A-Za-z0-9_-]{20,}+"),
    _prefixed("onepassword_token", ("ops_eyj",), _LU + r"ops_eyJ[A-Za-z0-9+/=_-]{50,}+"),
    _prefixed("prefect_token", ("pnu_",), _LU + r"pnu_[A-Za-z0-9]{36}" + _R, check=_random_token_ok),
    _prefixed(
        "planetscale_token",
        ("pscale_tkn_", "pscale_pw_", "pscale_oauth_"),
        _LU + r"pscale_(?:tkn|pw|oauth)_[A-Za-z0-9_.-]{32,64}+",
        check=_random_token_ok,
    ),
    _prefixed("square_token", ("sq0atp-", "sq0csp-"), _L + r"sq0(?:atp|csp)-[A-Za-z0-9_-]{22,43}+" + _RUD),
    _prefixed("flyio_token", ("fo1_",), _LU + r"fo1_[A-Za-z0-9_-]{39,}+", check=_random_token_ok),
    # Fly.io's macaroon tokens (`fly tokens create`): `FlyV1 ` then one or more comma-joined `fm1a_`,
    # `fm1r_` or `fm2_` pieces of base64; the scheme word is part of what `FLY_API_TOKEN` holds.
    Detector(
        "flyio_token",
        ("fm1a_", "fm1r_", "fm2_"),
        _compile(
            r"(?<![A-Za-z0-9_])fm(?:1[ar]|2)_[A-Za-z0-9+/=_-]{32,}+(?:,fm(?:1[ar]|2)_[A-Za-z0-9+/=_-]{16,}+)*+"
        ),
        finish=_fly_macaroon,
    ),
    # Azure's common annotated keys (OpenAI, AI services, Search, DevOps PATs since 2024...): 84
    # base62 characters with the signature `JQQJ` at offset 52. The signature is the keyword.
    Detector(
        "azure_key",
        ("jqqj",),
        _compile(r"(?<![A-Za-z0-9+/])[A-Za-z0-9]{52}JQQJ[A-Za-z0-9]{28}(?![A-Za-z0-9+/])"),
        PROVIDER,
        back=52,
        check=_random_token_ok,
    ),
    # --- AI providers. Anthropic first: its keys also start with `sk-`.
    _prefixed(
        "anthropic_api_key",
        ("sk-ant-",),
        _LUD + r"sk-ant-[a-z]{2,8}\d{0,3}-[A-Za-z0-9_-]{20,}+",
        check=_random_token_ok,
    ),
    _prefixed(
        "openai_api_key", ("sk-",), _LUD + r"sk-(?!ant-)[A-Za-z0-9_-]{20,}+" + _RUD, check=_random_token_ok
    ),
    _prefixed("huggingface_token", ("hf_",), _LU + r"hf_[A-Za-z0-9]{30,64}+" + _RU, check=_random_token_ok),
    _prefixed(
        "huggingface_token", ("api_org_",), _LU + r"api_org_[A-Za-z0-9]{30,64}+" + _RU, check=_random_token_ok
    ),
    _prefixed(
        "perplexity_api_key", ("pplx-",), _LUD + r"pplx-[A-Za-z0-9]{40,64}+" + _R, check=_random_token_ok
    ),
    _prefixed("groq_api_key", ("gsk_",), _LU + r"gsk_[A-Za-z0-9]{40,64}+" + _R, check=_random_token_ok),
    _prefixed("xai_api_key", ("xai-",), _LUD + r"xai-[A-Za-z0-9]{60,100}+" + _R, check=_random_token_ok),
    _prefixed("replicate_token", ("r8_",), _LU + r"r8_[A-Za-z0-9]{37}" + _R, check=_random_token_ok),
    # --- Session cookies (`Cookie:`, `Set-Cookie:`, `curl -b`): the value after a session name.
    Detector(
        "session_cookie",
        ("sessionid=", "sessid=", "connect.sid=", "session=", "session_id=", "session-id=", "session_token="),
        _compile(
            r"(?i:sessionid|sessid|connect\.sid|session(?:[_-]id|_token)?)="
            r"(?P<secret>[A-Za-z0-9%_.~+/=:-]{16,4096}+)"
        ),
        CONTEXT,
        finish=_cookie,
    ),
    # --- Passwords on command lines, where the flag is the program's own (`-p` means port elsewhere).
    Detector(
        "password",
        ("mysql", "mariadb"),
        _compile(
            r"(?i:mysql(?:dump|admin|sh|import|check|binlog)?|mariadb(?:-dump|-admin)?)(?=[ \t])"
            r"[^\n|;&]{0,200}?[ \t]-p(?P<value>\"[^\"\n]+\"|'[^'\n]+'|[^\s\"'`;&|<>()]+)"
        ),
        CONTEXT,
        finish=_cli_password,
    ),
    Detector(
        "password",
        ("sshpass",),
        _compile(
            r"sshpass[ \t]+(?:-[a-oq-zA-Z]\S*[ \t]+)*-p[ \t]*"
            r"(?P<value>\"[^\"\n]+\"|'[^'\n]+'|[^\s\"'`;&|<>()]+)"
        ),
        CONTEXT,
        finish=_cli_password,
    ),
    Detector(
        "password",
        ("redis-cli",),
        _compile(
            r"redis-cli(?=[ \t])[^\n|;&]{0,200}?[ \t]-a[ \t]+"
            r"(?P<value>\"[^\"\n]+\"|'[^'\n]+'|[^\s\"'`;&|<>()]+)"
        ),
        CONTEXT,
        finish=_cli_password,
    ),
    Detector(
        "password",
        ("-p ",),
        _compile(
            r"(?<![\w-])-p[ \t]+(?P<value>\"[^\"\n]+\"|'[^'\n]+'|[^\s\"'`;&|<>()-][^\s\"'`;&|<>()]*)"
            r"(?=[ \t]+(?:ssh|scp|rsync|sftp)\b)"
        ),
        CONTEXT,
        finish=_cli_password,
    ),
    # A container's env entry (pod spec, `kubectl get -o yaml`, compose): the name is a line above.
    Detector(
        "password",
        ("- name:",),
        _compile(
            r"- name:[ \t]*[\"']?(?P<name>[\w.-]{1,64})[\"']?[ \t]*\r?\n[ \t]*value:[ \t]*"
            r"(?P<value>\"[^\"\n]+\"|'[^'\n]+'|[^\s#][^\n]*)"
        ),
        CONTEXT,
        finish=_env_entry,
    ),
    # --- Django's SECRET_KEY: its alphabet has `(`, `)`, `#` and `&`, which end a generic value.
    _prefixed("django_secret_key", ("django-insecure-",), r"django-insecure-[^\s'\"`]{32,100}+"),
    Detector(
        "secret",
        ("secret_key",),
        _compile(
            r"(?<![A-Za-z0-9])SECRET_KEY(?:\"|')?[ \t]*[=:][ \t]*"
            r"(?P<q>[\"'])(?P<secret>[^'\"\n]{32,100})(?P=q)"
        ),
        CONTEXT,
        check=lambda value: _random_token_ok(value) and " " not in value,
    ),
    # --- Firebase Cloud Messaging server keys: an 11-character id, `:APA91b`, then 134 characters.
    _prefixed(
        "fcm_server_key",
        (":apa91b",),
        r"(?<![A-Za-z0-9_-])AAAA[A-Za-z0-9_-]{7}:APA91b[A-Za-z0-9_-]{134}" + _RUD,
        back=11,
    ),
    # --- AWS session tokens: base64 of a serialized structure, so a fixed start.
    _prefixed(
        "aws_session_token",
        ("fwogzxivyxdz", "fqogzxivyxdz", "iqojb3jpz2lu"),
        r"(?<![A-Za-z0-9+/])(?:F[wQ]oGZXIvYXdz|IQoJb3JpZ2lu)[A-Za-z0-9+/]{100,}+={0,2}",
    ),
    Detector(
        "aws_secret_access_key",
        ("secret access key", "secretaccesskey"),
        _compile(
            r"(?i:secret[ ]?access[ ]?key)(?:[ \t]*\[[^\]\n]{0,32}\])?\"?[ \t]*[:=][ \t]*\"?"
            r"(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"
        ),
        CONTEXT,
        check=lambda value: char_classes(value) >= 2 and _token_ok(value),
    ),
    Detector(
        "datadog_api_key",
        ("dd-api-key", "dd-application-key"),
        _compile(
            r"(?i:dd-api-key|dd-application-key)[ \t]*:[ \t]*(?P<secret>[a-f0-9]{32}(?:[a-f0-9]{8})?)" + _R
        ),
        CONTEXT,
        check=_token_ok,
    ),
    Detector(
        "twilio_auth_token",
        ("twilio",),
        _compile(_L + r"[0-9a-f]{32}" + _R),
        CONTEXT,
        window=200,
        check=_random_token_ok,
    ),
    Detector(
        "okta_token",
        ("okta",),
        _compile(r"(?<![A-Za-z0-9_-])00[A-Za-z0-9_-]{40}" + _RUD),
        CONTEXT,
        window=200,
        check=_random_token_ok,
    ),
    Detector(
        "sumologic_key",
        ("sumo",),
        _compile(r"(?<![A-Za-z0-9])su[A-Za-z0-9]{12}" + _R + r"|" + _L + r"[A-Za-z0-9]{64}" + _R),
        CONTEXT,
        window=200,
        check=lambda value: char_classes(value) >= 2 and not is_words(value) and _token_ok(value),
    ),
    _prefixed(
        "notion_token",
        ("secret_",),
        _LU + r"secret_[A-Za-z0-9]{43}" + _RU,
        check=lambda value: char_classes(value) >= 3 and _token_ok(value),
    ),
    _prefixed(
        "facebook_access_token",
        ("eaa",),
        _L + r"EAA[A-Za-z0-9]{90,}+" + _R,
        check=lambda value: char_classes(value) >= 3 and _token_ok(value),
    ),
    _prefixed(
        "twitter_bearer_token",
        ("aaaaaaaaaaaaaaaaaaaaa",),
        r"(?<![A-Za-z0-9%])A{21}[A-Za-z0-9]{15,40}(?:%[0-9A-F]{2}[A-Za-z0-9]{1,60}){1,4}+" + _R,
        check=lambda value: _random_token_ok(value.lstrip("A")),
    ),
    _prefixed(
        "brevo_api_key",
        ("xkeysib-", "xsmtpsib-"),
        _L + r"x(?:keysib|smtpsib)-[a-f0-9]{64}-[A-Za-z0-9]{16}" + _R,
    ),
    # --- Formats of the public rule sets with a fixed prefix.
    Detector(
        "airtable_token",
        (),
        _compile(r"pat(?<![A-Za-z0-9]pat)[A-Za-z0-9]{14}\.[a-f0-9]{64}" + _R),
        scan=True,
        min_length=82,
        check=_random_token_ok,
    ),
    _prefixed("adafruit_api_key", ("aio_",), _LU + r"aio_[A-Za-z0-9]{28}" + _R, check=_random_token_ok),
    _prefixed("clojars_token", ("clojars_",), _L + r"CLOJARS_[a-z0-9]{60}" + _R),
    _prefixed("duffel_token", ("duffel_",), _L + r"duffel_(?:test|live)_[A-Za-z0-9_-]{43}" + _RUD),
    _prefixed("easypost_api_key", ("ezak", "eztk"), _L + r"EZ[AT]K[a-z0-9]{54}" + _R),
    _prefixed("flutterwave_key", ("flwseck",), _L + r"FLWSECK(?:_TEST)?-[a-h0-9]{32}-X" + _R),
    _prefixed("flutterwave_key", ("flwenc",), _L + r"FLWSECK_TEST[a-h0-9]{12}" + _R),
    _prefixed("frameio_token", ("fio-u-",), _L + r"fio-u-[A-Za-z0-9_=-]{64}" + _RUD),
    _prefixed("readme_api_key", ("rdme_",), _LU + r"rdme_[a-z0-9]{70}" + _R),
    _prefixed("scalingo_token", ("tk-us-",), _L + r"tk-us-[A-Za-z0-9_-]{48}" + _RUD),
    _prefixed("shippo_token", ("shippo_",), _L + r"shippo_(?:live|test)_[a-f0-9]{40}" + _R),
    _prefixed("sourcegraph_token", ("sgp_",), _LU + r"sgp_(?:[a-f0-9]{16}_|local_)?[a-f0-9]{40}" + _R),
    _prefixed("typeform_token", ("tfp_",), _LU + r"tfp_[A-Za-z0-9_.=-]{59}" + _RUD, check=_random_token_ok),
    _prefixed("octopus_api_key", ("api-",), _L + r"API-[A-Z0-9]{26}" + _R, check=_random_token_ok),
    _prefixed("infracost_token", ("ico-",), _L + r"ico-[A-Za-z0-9]{32}" + _R, check=_random_token_ok),
    _prefixed(
        "settlemint_token",
        ("sm_pat_", "sm_aat_", "sm_sat_"),
        _LU + r"sm_(?:pat|aat|sat)_[A-Za-z0-9]{16}" + _R,
        check=_random_token_ok,
    ),
    _prefixed(
        "newrelic_key", ("nrii-", "nriq-", "nraa-"), _L + r"NRI[IQ]-[A-Za-z0-9_-]{32}|NRAA-[a-f0-9]{27}"
    ),
    _prefixed("yandex_token", ("y0_",), _LU + r"y0_[A-Za-z0-9_-]{55}" + _RUD, check=_random_token_ok),
    _prefixed("yandex_token", ("aqvn",), _L + r"AQVN[A-Za-z0-9_-]{35,38}" + _RUD, check=_random_token_ok),
    _prefixed("artifactory_token", ("cmvmd",), _L + r"cmVmd[A-Za-z0-9]{59}" + _R),
    _prefixed("clickhouse_key", ("4b1d",), _L + r"4b1d[A-Za-z0-9]{38}" + _R, check=_random_token_ok),
    _prefixed(
        "harness_token",
        ("pat.", "sat."),
        _L + r"(?:pat|sat)\.[A-Za-z0-9_-]{22}\.[0-9a-f]{24}\.[A-Za-z0-9]{20}" + _R,
    ),
    # --- Tokens by their shape, wherever they are.
    Detector(
        "jwt",
        ("eyj",),
        _compile(
            _LUD + r"eyJ[A-Za-z0-9_-]{8,}+\.[A-Za-z0-9_-]{8,}+\.[A-Za-z0-9_-]*+(?:\.[A-Za-z0-9_-]++){0,2}"
        ),
        CONTEXT,
        check=_token_ok,
    ),
    Detector(
        "url_password",
        ("://",),
        _compile(
            r"://(?P<user>[^\s/:@\[\]\"'<>]{0,256}+):(?P<secret>[^\s/\"'<>\[\]]{1,512})"
            r"@(?P<host>[A-Za-z0-9\[][^\s/@\"'<>]{0,256}+)"
        ),
        CONTEXT,
        finish=_url_password,
    ),
    Detector(
        "authorization",
        ("authorization",),
        _compile(
            r"(?i:authorization)"
            + _CLOSE
            + r"[ \t]*[:=][ \t]*"
            + _OPEN
            + r"(?:(?P<scheme>(?i:bearer|basic|token|bot|apikey|api-key|sso-key|key|ssws))[ \t]+)?"
            r"(?P<secret>[A-Za-z0-9._~+/=:%-]{8,2048}+)"
        ),
        CONTEXT,
        finish=_authorization,
    ),
    Detector(
        "authorization",
        ("bearer", "ssws"),
        _compile(_L + r"(?P<scheme>(?i:bearer|ssws))[ \t]+(?P<secret>[A-Za-z0-9._~+/%-]{16,}+=*)"),
        CONTEXT,
        finish=_authorization,
    ),
    Detector(
        "url_password",
        ("-u ", "--user ", "--user="),
        _compile(
            r"(?<![\w-])(?:-u|--user)[ =]+[\"']?(?P<user>[^\s:\"']{1,128}+):(?P<secret>[^\s\"']{1,256}+)"
        ),
        CONTEXT,
        finish=_url_password,
    ),
    # --- Fields whose name says secret: `password = "..."`, `API_KEY=...`, `"token": "..."`.
    Detector(
        "password",
        (
            "--pass",
            "--pw",
            "--token",
            "--secret",
            "--api-key",
            "--apikey",
            "--access-token",
            "--auth-token",
            "--client-secret",
        ),
        _compile(
            r"--(?P<name>(?i:passw(?:or)?d|passphrase|pass|pwd?|token|secret|api-?key|access-token|auth-token"
            r"|client-secret))(?:[ \t]+|=)(?P<value>\"[^\"\n]+\"|'[^'\n]+'|[^\s\"'`;&|<>()]+)"
        ),
        GENERIC,
        finish=_flag,
    ),
    Detector(
        "password",
        ("machine",),
        # A netrc line quoted in code (`"machine h password pass\n"`) ends its password at the escape.
        _compile(
            r"machine[ \t]+\S+(?:\s+login[ \t]+\S+)?\s+password[ \t]+(?P<secret>(?:[^\s\\]|\\(?![nrt\"']))+)"
        ),
        GENERIC,
        finish=_netrc,
    ),
    Detector(
        "password",
        ("add key=",),
        _compile(
            r"""add key=(?P<q>["'])(?P<name>[^"'\n]{1,64})(?P=q)[ \t]+"""
            r"""value=(?P=q)(?P<value>[^"'\n]{1,512})(?P=q)"""
        ),
        GENERIC,
        finish=_app_setting,
    ),
    Detector("password", _FIELD_KEYWORDS, _compile(_FIELD), GENERIC, finish=_field, prefiltered=True),
    Detector(
        "api_key",
        _followed(("_key", "-key", ".key")),
        _compile(_KEY_FIELD),
        GUESS,
        finish=_key_field,
        prefiltered=True,
    ),
)

KINDS: Final[frozenset[str]] = frozenset(
    {detector.kind for detector in DETECTORS}
    | {
        "aws_secret_access_key",
        "datadog_app_key",
        "password",
        "token",
        "secret",
        "credential",
        "api_key",
        "private_key",
    }
)
"""Every kind a mask can name."""
