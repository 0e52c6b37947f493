"""Value checks the detectors share: is a candidate a literal secret, or a placeholder, a reference, code?"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from typing import Final
from urllib.parse import unquote

from ahocorasick_rs import AhoCorasick, Implementation

__all__ = [
    "MASK_PREFIX",
    "PUBLISHED_EXAMPLES",
    "char_classes",
    "is_literal_secret",
    "is_placeholder",
    "is_reference",
    "is_sample_pair",
    "is_spelt_placeholder",
    "is_words",
    "looks_random",
    "mask",
    "shannon_entropy",
]

MASK_PREFIX: Final = "[REDACTED:"


def mask(kind: str) -> str:
    """The text that stands in for a secret of `kind`: `[REDACTED:<kind>]`, no part of the secret."""
    return f"{MASK_PREFIX}{kind}]"


# Whole values that people write where a secret would go, in docs, examples and templates.
_PLACEHOLDER_VALUES: Final = frozenset(
    {
        "none",
        "null",
        "nil",
        "undefined",
        "true",
        "false",
        "yes",
        "no",
        "on",
        "off",
        "empty",
        "unset",
        "notset",
        "not_set",
        "missing",
        "required",
        "optional",
        "hidden",
        "masked",
        "redacted",
        "removed",
        "secret",
        "secrets",
        "password",
        "passwd",
        "pass",
        "pwd",
        "token",
        "apikey",
        "api_key",
        "api-key",
        "key",
        "changeme",
        "change_me",
        "change-me",
        "changeit",
        "string",
        "str",
        "test",
        "example",
        "sample",
        "dummy",
        "placeholder",
        "default",
        "todo",
        "tbd",
        "fixme",
        "value",
        "bearer",
        "basic",
        # The web's stock example of a password, from a 2004 chat log: test data everywhere.
        "hunter2",
    }
)
# Fragments that mark a value as a stand-in, wherever they occur in it: marks, then words.
# Three dots: a value cut short where it is shown (`AccountKey=Lou...bzg==`), not a value to mask.
_PLACEHOLDER_MARKS: Final = ("...", "…", "[redacted", "<redacted", "redacted>", "xxxx")
_PLACEHOLDER_WORDS: Final = (
    "placeholder",
    "changeme",
    "change_me",
    "change-me",
    "replace_me",
    "replaceme",
    "replace-me",
    "your_",
    "your-",
    "yourpassword",
    "yourtoken",
    "yoursecret",
    "yourkey",
    "example",
    "dummy",
    "sample",
    "insert_",
    "insert-",
    "_here",
    "-here",
)
# A value that starts so is a reference resolved elsewhere (shell, template, vault, secret manager).
_REFERENCE_STARTS: Final = (
    "$",
    "{",
    "{%",
    "<",
    "#",
    "os.",
    "env.",
    "env:",
    "process.env",
    "settings.",
    "config.",
    "self.",
    "this.",
    "getenv",
    "environ",
    "secrets.",
    "vault:",
    "vault.",
    "ref+",
    "op://",
    "sm://",
    "arn:",
    "projects/",
    "keyvault:",
    "secretsmanager:",
    "@microsoft.keyvault",
    "file:",
)
# Starts a password may have too: a reference only in the shape of one (`%APPDATA%`, `%(pw)s`, a
# YAML tag `!vault |`, anchor `&db` or alias `*db`), not before random characters (`%r@zOs6`).
_REFERENCE_SHAPE: Final = re.compile(
    r"%[A-Za-z_]\w*%|%(?:\(\w+\))?[sdr]|![A-Za-z][\w:.-]*[ \t].*|\*+",
    re.ASCII | re.DOTALL,
)


# Values that standards fix for every implementation, under names that say "key": not secrets.
PUBLIC_CONSTANTS: Final = frozenset(
    {
        "258EAFA5-E914-47DA-95CA-C5AB0DC85B11",  # RFC 6455's WebSocket GUID, in every server
    }
)
# The example credentials the OAuth standards and the TOTP key URI format print, which the libraries
# implementing them copy into their tests and docstrings: public wherever they appear. Compared
# whole and case for case; a vendor's documented example key (AWS's `...EXAMPLE`) is not here, and
# is masked as its format.
PUBLISHED_EXAMPLES: Final = frozenset(
    {
        # RFC 6749 (OAuth 2.0): access and refresh tokens, an authorization code, the client
        # `s6BhdRkqt3` and its secret, alone and as HTTP Basic, a client secret, a password.
        "2YotnFZFEjr1zCsicMWpAA",
        "tGzv3JOkF0XG5Qx2TlKWIA",
        "SplxlOBeZQQYbYS6WxSbIA",
        "gX1fBat3bV",
        "czZCaGRSa3F0MzpnWDFmQmF0M2JW",
        "7Fjfp0ZBr1KtDRbnfVdmIw",
        "A3ddj3w",
        "h480djs93hd8",
        # RFC 6750 (bearer tokens), OpenID Connect Core 1.0 (access and refresh tokens).
        "mF_9.B5f-4.1JqM",
        "SlAV32hkKG",
        "8xLOxBtZp8",
        # RFC 5849 (OAuth 1.0): the consumer key and secret, the temporary and the token credentials.
        "dpf43f3p2l4k3l03",
        "kd94hf93k423kf44",
        "hh5s93j4hdidpola",
        "hdhd0244k9j7ao03",
        "nnch734d00sl2jdk",
        "pfkkdhi9sl3r4s00",
        "9djdj82h48djs9d2",
        "kkk9d7dh3k39sjv7",
        # Google Authenticator's key URI format: the example TOTP secret, as written and lower-cased.
        "JBSWY3DPEHPK3PXP",
        "jbswy3dpehpk3pxp",
    }
)


# A user and a password in lower-case letters, as test data writes them (`foo:bar`, `user:pass`,
# `login:pass`, `user":quoted`): the password eight letters at most; the user without a digit,
# marks as they come. A generated password has digits or capitals, and a key sent as the user of
# a pair (`k8Qw2Lp9:x`) has digits.
_SAMPLE_PAIR: Final = re.compile(r"[^:\s0-9]{1,32}:[a-z]{1,8}", re.ASCII)


def is_sample_pair(value: str) -> bool:
    """Whether `value` is `user:password` of test data: a password of 8 lower-case letters or fewer."""
    return _SAMPLE_PAIR.fullmatch(value) is not None


def is_reference(value: str) -> bool:
    """Whether `value` names a secret held elsewhere (`$DB_PASSWORD`, `{{ pw }}`, `%PW%`, `*alias`)."""
    lowered = value.lower()
    if lowered.startswith(_REFERENCE_STARTS):
        return True
    if value[:1] not in "%!&*":
        return False
    # A tag, an anchor or an alias names itself in words (`!Ref`, `*default_db`), as passwords don't.
    return _REFERENCE_SHAPE.fullmatch(value) is not None or is_words(value[1:].replace(".", "_"))


_PATH_START: Final = ("/", "./", "../", "~/")
_PATH_SEGMENT: Final = re.compile(r"[\w.@-]*", re.ASCII)
_FILE_NAME: Final = re.compile(
    r"[\w./-]+\.(?:pem|key|crt|cer|p12|pfx|jks|json|txt|env|ya?ml|toml|ini|cfg|conf|gpg|asc|pub)", re.ASCII
)
_VERSION: Final = re.compile(r"[\^~<>=!]{0,2}v?\d+(?:\.\d+)+(?:[-+.][\w.]+)?", re.ASCII)
# Code rather than a literal: dotted names (`request.form`, `settings.SECRET`), plain words in
# snake, kebab or camel case (`hashed_password`, `PasswordInput`), and constants (`DEFAULT_TOKEN`).
_DOTTED_NAME: Final = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+", re.ASCII)
# Camel case counts as words when each capital starts a run of at least two lower-case letters
# (`PasswordInput`, `hashedPassword`), which random letters (`aRzsHcZehv`) seldom do.
_WORDS: Final = re.compile(
    r"[a-z]+(?:[_-][a-z]+)*|[A-Z]+(?:_[A-Z]+)*|[a-z]*(?:[A-Z][a-z]{2,})+|[A-Z][a-z]+(?:[_-][A-Z][a-z]+)+",
    re.ASCII,
)
# A size or a count, as `kubectl describe secret` prints in place of a value (`token: 273 bytes`).
_SIZE: Final = re.compile(
    r"\d+(?:\.\d+)?[ \t]*(?:bytes?|[KMGTP]i?B|B|chars?|characters|items?|keys?|entries)", re.ASCII
)
# A repetition of a grammar's rule (ABNF, RFC 5234: `1*tchar`, `2*HEXDIG`, `*( "," OWS )`), as HTTP
# and mail libraries quote their RFCs in comments beside fields named `token`: a count, a star, a
# rule's name in words (checked with `_WORDS`).
_REPETITION: Final = re.compile(r"\d*\*\d*(?P<rule>[A-Za-z][A-Za-z-]*)", re.ASCII)
# A prefix being named or built on (`sk-ant-api03-`, `sha256:`, `ghp_`): lower case, short, and
# open at its end. Generated secrets are longer or mix cases (measured: none of the corpus's are so).
_PREFIX: Final = re.compile(r"[a-z0-9][a-z0-9_.-]{0,13}[-_:/]", re.ASCII)
# Words joined by `:`, `@`, `/` or `.` of which one says what the value stands for (`some:password`,
# `user@token`): test data that names itself.
_NAMED_PARTS: Final = re.compile(r"[a-z]+(?:[:@/.][a-z]+)+", re.ASCII)
# Two lower-case words (`entered pw`, `wrong password`): a phrase test data types. A pass phrase is
# three words and more (diceware's advice is six; the labelled corpus's are three to six).
_TWO_WORDS: Final = re.compile(r"[a-z]+ [a-z]+", re.ASCII)
_RUN: Final = re.compile(r"(.)\1{5}", re.DOTALL)
# A unit of one to four characters said three times or more, and nothing else (`GR?XGR?XGR?X`,
# `abababab`): typed by hand to fill a field. A generated value never repeats so.
_PERIODIC: Final = re.compile(r"(.{1,4}?)\1{2,}", re.DOTALL)
_SEQUENCE: Final = "0123456789abcdefghijklmnopqrstuvwxyz"
_SEQUENCE_WINDOWS: Final = tuple(_SEQUENCE[i : i + 10] for i in range(len(_SEQUENCE) - 9))
_LOWER: Final = frozenset(string.ascii_lowercase)
_UPPER: Final = frozenset(string.ascii_uppercase)
_DIGITS: Final = frozenset(string.digits)
_NOT_SYMBOLS: Final = frozenset(string.ascii_letters + string.digits + "_-.")
_MARKS_AND_SEQUENCES: Final = (*_PLACEHOLDER_MARKS, *_SEQUENCE_WINDOWS)
# One automaton pass for the fragments: 0.2-0.3 us a value, where `in` per fragment took 1.3-1.5
# (and one `re` alternation more, tried branch by branch). Text dense with field names asks this of
# thousands of values a megabyte.
_MARKS_AND_SEQUENCES_FOUND: Final = AhoCorasick(list(_MARKS_AND_SEQUENCES), implementation=Implementation.DFA)
_PLACEHOLDER_WORDS_FOUND: Final = AhoCorasick(list(_PLACEHOLDER_WORDS), implementation=Implementation.DFA)


def shannon_entropy(value: str) -> float:
    """Bits per character of `value`, from its own character frequencies."""
    if not value:
        return 0.0
    length = len(value)
    return -sum(n / length * math.log2(n / length) for n in Counter(value).values())


def char_classes(value: str) -> int:
    """How many of lower case, upper case, digits and symbols (other than `_-.`) `value` mixes."""
    chars = set(value)
    return (
        (not chars.isdisjoint(_LOWER))
        + (not chars.isdisjoint(_UPPER))
        + (not chars.isdisjoint(_DIGITS))
        + bool(chars - _NOT_SYMBOLS)
    )


def _is_path(value: str) -> bool:
    if _FILE_NAME.fullmatch(value) or value[1:3] == ":\\":
        return True
    if not value.startswith(_PATH_START):
        # `kv/data/app`, `secret/prod/db`: words between slashes name a place, they are not a key.
        return "/" in value and all(
            not segment or segment.isdigit() or _WORDS.fullmatch(segment) for segment in value.split("/")
        )
    # A base64 secret may start with "/" too; its segments mix cases and digits, a path's rarely do.
    segments = value.split("/")
    return all(
        _PATH_SEGMENT.fullmatch(segment) and (len(segment) < 8 or char_classes(segment) < 3)
        for segment in segments
    )


def is_words(value: str) -> bool:
    """Whether `value` is a word or a name in snake, kebab, camel or upper case (`PasswordInput`)."""
    return _WORDS.fullmatch(value) is not None


def is_placeholder(value: str, *, words: bool = True) -> bool:
    """Whether `value` is a stand-in: masked, repeated, sequential, or (with `words`) an example.

    Args:
        value: The candidate secret, whole.
        words: Also count words such as `example`, `your_`, `changeme`. Token formats pass False:
            a format-valid key that says EXAMPLE (AWS's documented one) is masked all the same.

    Returns:
        True for `[REDACTED:...]`, `xxxx`, `******`, `000000`, `1234567890`, `abcdefghij`,
        `<your-token>` and the like; False for anything that could be a real credential.
    """
    if MASK_PREFIX in value:
        return True
    if len(set(value)) <= 3 or _RUN.search(value) or _PERIODIC.fullmatch(value):
        return True
    lowered = value.lower()
    if _MARKS_AND_SEQUENCES_FOUND.find_matches_as_indexes(lowered):
        return True
    return words and bool(_PLACEHOLDER_WORDS_FOUND.find_matches_as_indexes(lowered))


def looks_random(value: str, *, min_length: int = 16) -> bool:
    """Whether `value` reads as generated: long enough, mixed classes, a digit, no placeholder.

    Args:
        value: The candidate.
        min_length: Shorter values are never called random.

    Returns:
        True for values such as API keys and hex or base64 secrets.
    """
    if len(value) < min_length or is_placeholder(value):
        return False
    if not any(char.isdigit() for char in value):
        return False
    return char_classes(value) >= 2 and shannon_entropy(value) >= 3.0


_TRAILING_ESCAPES: Final = re.compile(r"(?:\\+[nrt])+\Z")
_LEET: Final = (str.maketrans("013457@$", "oieastas"), str.maketrans("013457@$", "oleastas"))
"""Digits and symbols read as the letters they stand for; `1` as `i`, then as `l`."""


_MARKS: Final = re.compile(r"[^a-z0-9]+")
_COUNTED: Final = re.compile(r"([a-z_-]+)[0-9]{1,3}")
# The longest placeholder (11 letters) with two marks between each of its letters, and a line's end.
_SPELT_MAX: Final = 32


def is_spelt_placeholder(lowered: str) -> bool:
    """Whether `lowered` is a placeholder written with digits for letters (`s3cret`, `p4ssw0rd`), with
    marks between them (`sec==ret`, `p@ss-word`) or a count of up to three digits after it
    (`password1`): test data's way of spelling one, guessed by anyone who tries the word."""
    if lowered.isalpha() or len(lowered) > _SPELT_MAX:
        return False
    counted = _COUNTED.fullmatch(lowered)
    if counted is not None and counted[1] in _PLACEHOLDER_VALUES:
        return True  # `password1`, `secret123`: the word and a count, first in every guessing list
    for table in _LEET:
        spelt = lowered.translate(table)
        if spelt in _PLACEHOLDER_VALUES or _MARKS.sub("", spelt) in _PLACEHOLDER_VALUES:
            return True
    return False


_PERCENT_ESCAPE: Final = re.compile(r"%[0-9A-Fa-f]{2}")


_UNRESERVED: Final = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
"""What a URL never needs to escape (RFC 3986, 2.3): an escape of one is no URL's writing."""


def _percent_decoded(value: str) -> str | None:
    """What the percent escapes of `value` stand for; None: it has none, they are no UTF-8, or one
    escapes what no URL escapes (`001%2e3450` is a password with `%` in it, not `001.3450`)."""
    if "%" not in value:
        return None
    escapes = _PERCENT_ESCAPE.findall(value)
    if not escapes or any(int(escape[1:], 16) in _UNRESERVED for escape in escapes):
        return None
    try:
        return unquote(value, errors="strict")
    except UnicodeDecodeError:
        return None


def is_literal_secret(value: str, *, quoted: bool, digits: bool = False) -> bool:
    """Whether the value of a secret-named field (`password = ...`) is a literal secret.

    Not secrets: empty and short values, placeholders (`changeme`, `<token>`, `xxx`, `***`),
    references (`$VAR`, `${VAR}`, `{{ x }}`, `os.environ[...]`, `vault:...`), paths, URLs,
    numbers, versions, and (unquoted) names that are code (`hashed_password`, `self.token`).

    Args:
        value: The value as written, without its quotes.
        quoted: Whether it was written between quotes: then it is a literal for sure, and only
            its content decides.
        digits: The field's name says password (`password`, `db_pass`, `pwd`): there a value of
            digits only is a PIN or a password, where under any other name (`port`, `token_ttl`,
            `api_key_id`) it is a number.

    Returns:
        True when the value should be masked.
    """
    # A line end written into the literal (`'secret\\n'`, doubled in a docstring) is how the value is
    # sent, not part of it: judged without it, a placeholder stays one.
    value = _TRAILING_ESCAPES.sub("", value)
    if len(value) < 6 or len(value) > 1024:
        return False
    if value.upper() in PUBLIC_CONSTANTS or value in PUBLISHED_EXAMPLES:
        return False
    lowered = value.lower()
    if lowered in _PLACEHOLDER_VALUES or is_reference(value) or is_spelt_placeholder(lowered):
        return False
    decoded = _percent_decoded(value)
    if decoded is not None:
        # `user%40email.com:password`, `%E3%83%92:%E3%82%AD`: percent escapes are how a value is
        # written into a URL; what they stand for is the value, judged as such.
        return is_literal_secret(decoded, quoted=quoted, digits=digits)
    if "${" in value or "{{" in value or "://" in value:
        return False
    if _SIZE.fullmatch(value) or _PREFIX.fullmatch(value):
        return False
    if not digits and (repeated := _REPETITION.fullmatch(value)) and _WORDS.fullmatch(repeated["rule"]):
        # Not for a password, which a person may well write so.
        return False
    if is_sample_pair(value) or _TWO_WORDS.fullmatch(value):
        return False
    if _NAMED_PARTS.fullmatch(value) and not _PLACEHOLDER_VALUES.isdisjoint(re.split(r"[:@/.]", value)):
        return False
    if lowered == value.upper():
        # Numbers, dates, times, ratios, addresses: no generated secret goes without letters.
        return digits and value.isascii() and value.isdigit() and not is_placeholder(value)
    if _VERSION.fullmatch(value) or is_placeholder(value) or _is_path(value):
        return False
    if value.endswith(("(", ")", "]", ",", ";")):
        return False
    if _WORDS.fullmatch(value):
        return False
    if not quoted and _DOTTED_NAME.fullmatch(value) and all(map(_WORDS.fullmatch, value.split("."))):
        return False
    return char_classes(value) >= 2
