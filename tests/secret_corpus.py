"""Fake, format-valid secrets from each format's published grammar, and a labelled corpus built with them.

No real secret is stored anywhere: every value is drawn at random from the grammar (a fixed seed
makes the corpus the same on every run). The grammar serves three users: the seeded corpus here,
the Hypothesis strategies in `strategies.py`, and `benchmarks/redaction.py`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import string
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

B62: Final = string.ascii_letters + string.digits
URLSAFE: Final = B62 + "_-"
B64: Final = B62 + "+/"
HEX: Final = "0123456789abcdef"
UPPER_DIGITS: Final = string.ascii_uppercase + string.digits
BASE32: Final = string.ascii_uppercase + "234567"
LETTERS: Final = string.ascii_letters
# Passwords as people and generators make them; none of the characters that end a value in the
# formats that hold it unquoted (blanks, quotes, `,;&|<>()[]{}`, `#` of comments, `$` of references).
PASSWORD_CHARS: Final = B62 + "!@%^*_+-=.~"

LOOKALIKES_FILE: Final = Path(__file__).parent / "data" / "redaction" / "lookalikes.txt"


@dataclass(frozen=True)
class Chars:
    """A run of `low` to `high` characters drawn from `alphabet`."""

    alphabet: str
    low: int
    high: int


@dataclass(frozen=True)
class OneOf:
    """One of the literal `options`."""

    options: tuple[str, ...]


@dataclass(frozen=True)
class Lines:
    """`low` to `high` runs of `chars`, joined by `sep` (the body of a PEM block)."""

    chars: Chars
    sep: str
    low: int
    high: int


Piece = str | Chars | OneOf | Lines


_GUID: Final = (
    Chars(HEX, 8, 8),
    "-",
    Chars(HEX, 4, 4),
    "-",
    Chars(HEX, 4, 4),
    "-",
    Chars(HEX, 4, 4),
    "-",
    Chars(HEX, 12, 12),
)


@dataclass(frozen=True)
class Format:
    """A credential format: its grammar, the kind it is masked as, and where it is met.

    `contexts` are templates with `{}` for the value. Empty: the format names itself and is met
    anywhere (the neutral contexts apply). The secret is the value, whole.
    """

    name: str
    kind: str
    pieces: tuple[Piece, ...]
    contexts: tuple[str, ...] = ()

    def generate(self, rng: random.Random) -> str:
        return "".join(_draw(piece, rng) for piece in self.pieces)


def _run(chars: Chars, rng: random.Random) -> str:
    return "".join(rng.choice(chars.alphabet) for _ in range(rng.randint(chars.low, chars.high)))


def _draw(piece: Piece, rng: random.Random) -> str:
    if isinstance(piece, str):
        return piece
    if isinstance(piece, Chars):
        return _run(piece, rng)
    if isinstance(piece, OneOf):
        return rng.choice(piece.options)
    return piece.sep.join(_run(piece.chars, rng) for _ in range(rng.randint(piece.low, piece.high)))


def _pem(kind_word: str, sep: str = "\n") -> tuple[Piece, ...]:
    return (
        f"-----BEGIN {kind_word}PRIVATE KEY-----{sep}",
        Lines(Chars(B64, 64, 64), sep, 3, 24),
        sep,
        Chars(B64, 8, 60),
        OneOf(("", "=", "==")),
        f"{sep}-----END {kind_word}PRIVATE KEY-----",
    )


def _key_body(sep: str, width: int = 64) -> tuple[Piece, ...]:
    """A private key's body without its armour: what a range of lines or a diff hunk shows."""
    return (
        Lines(Chars(B64, width, width), sep, 3, 24),
        sep,
        Chars(B64, 8, width - 4),
        OneOf(("", "=", "==")),
    )


# Where a field-named secret is met: .env, shell, YAML, JSON, INI, Python, TOML, XML, k8s.
def _field_contexts(*names: str) -> tuple[str, ...]:
    contexts: list[str] = []
    for name in names:
        upper = name.upper()
        contexts += [
            f"{upper}={{}}",
            f'export {upper}="{{}}"',
            f"  {name}: {{}}",
            f'  {name}: "{{}}"',
            f'{{{{"{name}": "{{}}", "port": 5432}}}}',
            f"{name} = {{}}",
            f'{name} = "{{}}"',
            f"    {name}='{{}}',",
            f'DATABASES["default"]["{upper}"] = "{{}}"',
            f'+    {name}: str = "{{}}"',
            f"<{name}>{{}}</{name}>",
            f'  "{name}": "{{}}",',
        ]
    return tuple(contexts)


FORMATS: Final[tuple[Format, ...]] = (
    Format("aws_access_key_id", "aws_access_key_id", (OneOf(("AKIA", "ASIA")), Chars(BASE32, 16, 16))),
    Format(
        "aws_secret_access_key",
        "aws_secret_access_key",
        (Chars(B64, 40, 40),),
        (
            "aws_secret_access_key = {}",
            "AWS_SECRET_ACCESS_KEY={}",
            '        "SecretAccessKey": "{}",',
            "s3 = boto3.client('s3', aws_access_key_id=key_id, aws_secret_access_key='{}')",
            "AWS Secret Access Key [None]: {}",
        ),
    ),
    Format("google_api_key", "google_api_key", ("AIza", Chars(URLSAFE, 35, 35))),
    Format("google_oauth_client_secret", "google_oauth_client_secret", ("GOCSPX-", Chars(URLSAFE, 28, 28))),
    Format(
        "gcp_service_account",
        "private_key",
        _pem("", "\\n"),
        (
            '{{"type": "service_account", "project_id": "demo-1234", "private_key_id": "'
            + "0" * 8
            + '", "private_key": "{}\\n", "client_email": "svc@demo-1234.iam.gserviceaccount.com"}}',
        ),
    ),
    Format(
        "azure_storage_key",
        "azure_storage_key",
        (Chars(B64, 86, 86), "=="),
        (
            "DefaultEndpointsProtocol=https;AccountName=demostore;AccountKey={};EndpointSuffix=core.windows.net",
            'AZURE_STORAGE_CONNECTION_STRING="DefaultEndpointsProtocol=https;AccountName=x;AccountKey={}"',
        ),
    ),
    Format(
        "azure_client_secret",
        "azure_client_secret",
        (Chars(B62 + "_~.", 3, 3), Chars(string.digits, 1, 1), "Q~", Chars(B62 + "_~.-", 31, 34)),
    ),
    Format(
        "github_classic",
        "github_token",
        (OneOf(("ghp_", "gho_", "ghu_", "ghs_", "ghr_")), Chars(B62, 36, 36)),
    ),
    Format(
        "github_fine_grained", "github_token", ("github_pat_", Chars(B62, 22, 22), "_", Chars(B62, 59, 59))
    ),
    Format(
        "gitlab_token", "gitlab_token", (OneOf(("glpat-", "gldt-", "glrt-", "glptt-")), Chars(B62, 20, 40))
    ),
    Format("bitbucket_app_password", "bitbucket_app_password", ("ATBB", Chars(B62, 32, 32))),
    Format("atlassian_api_token", "atlassian_api_token", ("ATATT3xFfGF0", Chars(URLSAFE + "=", 170, 190))),
    Format("pypi_token", "pypi_token", ("pypi-AgEIcHlwaS5vcmc", Chars(URLSAFE, 60, 160))),
    Format("npm_token", "npm_token", ("npm_", Chars(B62, 36, 36))),
    Format(
        "slack_bot_token",
        "slack_token",
        (
            OneOf(("xoxb-", "xoxp-")),
            Chars(string.digits, 10, 13),
            "-",
            Chars(string.digits, 10, 13),
            "-",
            Chars(B62, 24, 32),
        ),
    ),
    Format(
        "slack_webhook",
        "slack_webhook_url",
        (
            "https://hooks.slack.com/services/T",
            Chars(UPPER_DIGITS, 8, 10),
            "/B",
            Chars(UPPER_DIGITS, 8, 10),
            "/",
            Chars(B62, 24, 24),
        ),
    ),
    Format(
        "discord_bot_token",
        "discord_bot_token",
        (OneOf(("M", "N", "O")), Chars(B62, 23, 25), ".", Chars(URLSAFE, 6, 6), ".", Chars(URLSAFE, 27, 38)),
        (
            "DISCORD_BOT_TOKEN={}",
            "client.run('{}')  # discord bot",
            "[discord] logging in with bot token {}",
        ),
    ),
    Format(
        "discord_webhook",
        "discord_webhook_url",
        ("https://discord.com/api/webhooks/", Chars(string.digits, 17, 19), "/", Chars(URLSAFE, 68, 68)),
    ),
    Format(
        "teams_webhook",
        "teams_webhook_url",
        (
            "https://",
            Chars(string.ascii_lowercase, 4, 12),
            ".webhook.office.com/webhookb2/",
            *_GUID,
            "@",
            *_GUID,
            "/IncomingWebhook/",
            Chars(HEX, 32, 32),
            "/",
            *_GUID,
        ),
    ),
    Format(
        "url_key",
        "url_key",
        (Chars(B62, 24, 40), "A1"),
        (
            "GET /maps/api/geocode/json?address=Berlin&key={}",
            "curl -s 'https://fn-orders.azurewebsites.net/api/Create?code={}'",
            "https://cdn.example.net/i/42.png?expires=1767225600&signature={}",
        ),
    ),
    Format(
        "webhook_path",
        "webhook_url",
        (Chars(B62, 20, 32), "7q"),
        ("https://hooks.zapier.com/hooks/catch/4821937/{}/", "POST /api/v2/webhooks/{} HTTP/1.1"),
    ),
    Format(
        "flyio_macaroon",
        "flyio_token",
        ("FlyV1 fm2_", Chars(B64, 120, 300), "==,fm2_", Chars(B64, 40, 80)),
        ('FLY_API_TOKEN="{}"', "flyctl deploy --access-token '{}'", "export FLY_API_TOKEN='{}'"),
    ),
    Format("azure_annotated_key", "azure_key", (Chars(B62, 52, 52), "JQQJ99", Chars(B62, 26, 26))),
    Format("stripe_key", "stripe_key", (OneOf(("sk_live_", "rk_live_", "sk_test_")), Chars(B62, 24, 99))),
    Format("twilio_api_key", "twilio_api_key", ("SK", Chars(HEX, 32, 32))),
    Format("twilio_account_sid", "twilio_account_sid", ("AC", Chars(HEX, 32, 32))),
    Format(
        "sendgrid_api_key", "sendgrid_api_key", ("SG.", Chars(URLSAFE, 22, 22), ".", Chars(URLSAFE, 43, 43))
    ),
    Format("mailgun_api_key", "mailgun_api_key", ("key-", Chars(HEX, 32, 32))),
    Format(
        "shopify_token",
        "shopify_token",
        (OneOf(("shpat_", "shpss_", "shpca_", "shppa_")), Chars(HEX, 32, 32)),
    ),
    Format(
        "datadog_api_key",
        "datadog_api_key",
        (Chars(HEX, 32, 32),),
        ("DD_API_KEY={}", "  datadog_api_key: {}", "DD-API-KEY: {}", 'export DATADOG_API_KEY="{}"'),
    ),
    Format("openai_legacy", "openai_api_key", ("sk-", Chars(B62, 20, 20), "T3BlbkFJ", Chars(B62, 20, 20))),
    Format("openai_project", "openai_api_key", ("sk-proj-", Chars(URLSAFE, 120, 160))),
    Format("anthropic_api_key", "anthropic_api_key", ("sk-ant-api03-", Chars(URLSAFE, 93, 93), "AA")),
    Format("huggingface_token", "huggingface_token", ("hf_", Chars(LETTERS, 34, 34))),
    Format(
        "jwt",
        "jwt",
        ("eyJ", Chars(URLSAFE, 20, 40), ".eyJ", Chars(URLSAFE, 40, 160), ".", Chars(URLSAFE, 43, 86)),
    ),
    Format("rsa_private_key", "private_key", _pem("RSA ")),
    Format("ec_private_key", "private_key", _pem("EC ")),
    Format("pkcs8_private_key", "private_key", _pem("")),
    Format("openssh_private_key", "private_key", _pem("OPENSSH ")),
    Format("encrypted_private_key", "private_key", _pem("ENCRYPTED ")),
    Format(
        "private_key_body",
        "private_key",
        _key_body("\n"),
        ("{}", "lines 2-27 of id_rsa:\n{}\n", "{}\n-----END RSA PRIVATE KEY-----", "-- \n{}\n\n"),
    ),
    Format("openssh_private_key_body", "private_key", _key_body("\n", 70), ("{}", "{}\n-----END OPENSSH")),
    Format("private_key_body_in_a_diff", "private_key", _key_body("\n+"), ("@@ -1,27 +1,27 @@\n+{}\n ok",)),
    Format(
        "private_key_body_in_yaml",
        "private_key",
        _key_body("\n    "),
        ("tls:\n  key: |\n    {}\n  cert: ./c",),
    ),
    Format(
        "passphrase_field",
        "password",
        (Lines(Chars(string.ascii_lowercase, 4, 9), " ", 3, 6),),
        (
            'password: "{}"',
            'PASSPHRASE="{}"',
            '{{"passphrase": "{}", "port": 5432}}',
            "    passphrase = '{}'",
            "  passphrase: {}",
            "ssh_key_passphrase: {}\nnext: 1",
        ),
    ),
    Format(
        "password_with_separators",
        "password",
        # A letter first: a value of digits alone reads as a number (an id, a port), which no field
        # detector masks (a gap the README names); this format is about the separators.
        (Chars(string.ascii_letters, 1, 1), Chars(PASSWORD_CHARS + "&,|", 6, 22), Chars(string.digits, 1, 1)),
        ("DB_PASSWORD={}", "  password: {}", "password = {}", "passwd={}\nuser=app", "    db_password: {}"),
    ),
    Format(
        "url_password",
        "url_password",
        (Chars(B62, 1, 1), Chars(PASSWORD_CHARS.replace("@", ""), 6, 22), Chars(string.digits, 1, 1)),
        (
            "DATABASE_URL=postgres://app:{}@db.internal:5432/app",
            "redis://:{}@cache:6379/0",
            "remote: https://deploy:{}@git.example.com/org/repo.git",
            "amqp://guest:{}@rabbitmq:5672/%2f",
            "mongodb+srv://admin:{}@cluster0.abcde.mongodb.net/test?retryWrites=true",
        ),
    ),
    Format(
        "bearer_token",
        "authorization",
        (Chars(B62, 1, 1), Chars(URLSAFE + ".", 31, 63)),
        (
            "> Authorization: Bearer {}",
            "curl -H 'Authorization: Bearer {}' https://api.example.com/v1/items",
            '{{"headers": {{"Authorization": "Bearer {}"}}}}',
        ),
    ),
    Format(
        "basic_auth",
        "authorization",
        (Chars(B62, 16, 40), OneOf(("", "=", "=="))),
        ("Authorization: Basic {}",),
    ),
    Format(
        "password_field",
        "password",
        # Generated passwords hold a digit (the usual policy); a run of letters alone reads as a name.
        (Chars(B62, 1, 1), Chars(PASSWORD_CHARS, 8, 22), Chars(string.digits, 1, 1)),
        _field_contexts("password", "db_password", "passwd", "smtp_pass"),
    ),
    Format(
        "secret_field",
        "secret",
        (Chars(B62, 20, 48),),
        _field_contexts("secret", "client_secret", "jwt_secret", "secret_key"),
    ),
    Format(
        "token_field",
        "token",
        (Chars(URLSAFE, 24, 48),),
        _field_contexts("token", "auth_token", "access_token", "refresh_token"),
    ),
    Format(
        "api_key_field",
        "api_key",
        (Chars(HEX, 32, 40),),
        _field_contexts("api_key", "apikey", "cohere_api_key", "x-api-key"),
    ),
    Format(
        "age_secret_key",
        "age_secret_key",
        ("AGE-SECRET-KEY-1", Chars("QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", 58, 58)),
    ),
    Format("digitalocean_token", "digitalocean_token", ("dop_v1_", Chars(HEX, 64, 64))),
    Format("vault_token", "vault_token", ("hvs.", Chars(URLSAFE, 90, 100))),
    Format("databricks_token", "databricks_token", ("dapi", Chars(HEX, 32, 32))),
    Format("dockerhub_token", "dockerhub_token", ("dckr_pat_", Chars(URLSAFE, 27, 27))),
)

# Surroundings of a secret that gives itself away: log lines, .env, JSON, YAML, diffs, tracebacks.
NEUTRAL_CONTEXTS: Final = (
    "2024-05-01 12:00:03,114 DEBUG client: configured with {}",
    "export GH_CREDENTIAL_VALUE={}",
    '{{"id": 42, "value": "{}", "ok": true}}',
    "  value: {}",
    '+    client = Client("{}")',
    "-    client = Client('{}')",
    "ValueError: invalid credential '{}' for host api.example.com",
    "  File \"/srv/app/main.py\", line 12, in <module>\n    connect('{}')\nConnectionError: refused",
    "$ curl -s https://api.example.com/v1/me -d 'k={}'",
    "prod,{},2024-05-01T00:00:00Z",
    "| staging | `{}` | rotated |",
    '<add name="Upstream" value="{}" />',
    "    env:\n      - name: UPSTREAM\n        value: {}",
    "WARNING: found {} in build log",
    "{}",
)


def _sha(rng: random.Random, n: int = 40) -> str:
    return hashlib.sha256(rng.randbytes(16)).hexdigest()[:n]


def _hex64(rng: random.Random) -> str:
    return hashlib.sha256(rng.randbytes(8)).hexdigest()


def _b64(rng: random.Random, n: int) -> str:
    return base64.b64encode(rng.randbytes(n)).decode()


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128)))


# Clean tool output, the bulk of what the redactor sees: none of it is a secret.
def _git_log(rng: random.Random) -> str:
    subjects = (
        "Fix token parsing in the password reset flow",
        "Bump requests from 2.31.0 to 2.32.3",
        "Refactor secret rotation job; add tests",
        "Use os.environ for API_KEY instead of config",
    )
    return "".join(
        f"commit {_sha(rng)}\nAuthor: Dev Person <dev@example.com>\nDate:   Mon Jan {rng.randint(1, 28)} "
        f"10:00:00 2024 +0000\n\n    {rng.choice(subjects)} (#{rng.randrange(9999)})\n\n"
        for _ in range(3)
    )


def _pytest(rng: random.Random) -> str:
    names = ("test_login_with_password", "test_token_refresh", "test_parse", "test_secret_rotation")
    lines = [
        f"tests/test_mod{rng.randrange(50)}.py::{rng.choice(names)}[case-{rng.randrange(9)}] "
        f"{rng.choice(('PASSED', 'PASSED', 'PASSED', 'FAILED', 'SKIPPED'))} [{rng.randrange(100):3d}%]"
        for _ in range(12)
    ]
    return "\n".join(lines) + f"\n===== {rng.randrange(200)} passed, 1 failed in 3.21s =====\n"


def _lockfile(rng: random.Random) -> str:
    return (
        json.dumps(
            {
                "node_modules/pkg": {
                    "version": f"1.{rng.randrange(20)}.{rng.randrange(20)}",
                    "resolved": "https://registry.npmjs.org/pkg/-/pkg-1.0.0.tgz",
                    "integrity": "sha512-"
                    + base64.b64encode(hashlib.sha512(rng.randbytes(8)).digest()).decode(),
                    "dependencies": {"js-tokens": "^4.0.0", "key-tree-store": "^1.3.0"},
                }
            },
            indent=2,
        )
        + "\n"
        + 'name = "requests"\nversion = "2.31.0"\nhashes = [\n'
        + f'    "sha256:{hashlib.sha256(rng.randbytes(8)).hexdigest()}",\n]\n'
    )


def _code(rng: random.Random) -> str:
    return f'''def handle(self, request, token=None):
    """Return the key for the given token."""
    for key, value in self.items():
        if key == token:
            return value
    password = os.environ["DB_PASSWORD"]
    api_key = settings.API_KEY
    request_id = "{_uuid(rng)}"
    raise KeyError(key)
'''


def _traceback(rng: random.Random) -> str:
    return f"""Traceback (most recent call last):
  File "/home/dev/project/src/app/main.py", line {rng.randrange(300)}, in <module>
    main()
  File "/home/dev/project/src/app/auth.py", line 42, in check_password
    raise AuthError("password mismatch for user id {rng.randrange(10**6)}")
app.errors.AuthError: password mismatch
"""


def _diff(rng: random.Random) -> str:
    return f"""diff --git a/src/app/config.py b/src/app/config.py
index {_sha(rng, 7)}..{_sha(rng, 7)} 100644
--- a/src/app/config.py
+++ b/src/app/config.py
@@ -10,7 +10,7 @@ class Settings:
-    timeout: int = 30
+    timeout: int = 60
     token_ttl_seconds: int = 3600
     password_min_length: int = 12
"""


def _lint(rng: random.Random) -> str:
    return (
        f"src/app/module.py:{rng.randrange(500)}:5: E501 line too long (120 > 110 characters)\n"
        "src/app/tokens.py:3:1: F401 'os' imported but unused\n"
        'src/app/secrets.py:9:1: S105 Possible hardcoded password assigned to: "PASSWORD_FIELD"\n'
        "Found 3 errors.\n"
    )


def _docker(rng: random.Random) -> str:
    return (
        f"#5 [2/6] RUN pip install --no-cache-dir -r requirements.txt\n"
        f"#5 sha256:{hashlib.sha256(rng.randbytes(8)).hexdigest()} 12.3MB / 45.6MB 1.2s\n"
        f"#6 exporting to image\n#6 writing image sha256:{_hex64(rng)} done\n"
        f"Successfully tagged registry.example.com/app@sha256:{_hex64(rng)}\n"
    )


def _ls(rng: random.Random) -> str:
    return "".join(
        f"-rw-r--r--  1 dev  staff  {rng.randrange(10**6):7d} May  1 12:00 {name}\n"
        for name in ("README.md", "pyproject.toml", "token_store.py", "password_policy.md", ".env.example")
    )


def _image(rng: random.Random) -> str:
    return f'<img alt="logo" src="data:image/png;base64,{_b64(rng, rng.randint(300, 900))}">\n'


CLEAN_BLOCKS: Final[tuple[Callable[[random.Random], str], ...]] = (
    _git_log,
    _pytest,
    _lockfile,
    _code,
    _traceback,
    _diff,
    _lint,
    _docker,
    _ls,
    _image,
)


def clean_output(rng: random.Random, size: int) -> str:
    """About `size` characters of clean, realistic tool output."""
    blocks: list[str] = []
    total = 0
    while total < size:
        block = rng.choice(CLEAN_BLOCKS)(rng)
        blocks.append(block)
        total += len(block)
    return "".join(blocks)


@dataclass(frozen=True)
class Sample:
    """A labelled text: where each secret in it is, and its format."""

    text: str
    secrets: tuple[tuple[int, int, str], ...]  # start, end, format name


def place(fmt: Format, rng: random.Random) -> Sample:
    """One secret of `fmt` in one of its contexts, labelled."""
    value = fmt.generate(rng)
    template = rng.choice(fmt.contexts or NEUTRAL_CONTEXTS)
    before, after = template.split("{}", 1)
    before, after = before.format(), after.format()
    return Sample(before + value + after, ((len(before), len(before) + len(value), fmt.name),))


def lookalikes() -> tuple[str, ...]:
    """The hand-written negatives: one look-alike per line, none of them a secret."""
    lines = LOOKALIKES_FILE.read_text(encoding="utf-8").splitlines()
    return tuple(line.replace("\\n", "\n") for line in lines if line and not line.startswith("#"))


def generated_lookalikes(rng: random.Random) -> Iterator[str]:
    """Look-alikes with random parts: hashes, ids, digests, images, public keys, placeholders."""
    sha = _sha(rng)
    yield f"commit {sha}"
    yield f"{sha[:7]} Merge pull request #{rng.randrange(999)} from org/token-refresh"
    yield f"index {_sha(rng, 7)}..{_sha(rng, 7)} 100644"
    yield f'"id": "{_uuid(rng)}",'
    yield f"request_id={_uuid(rng)} trace_id={_sha(rng, 32)}"
    yield f'"integrity": "sha512-{base64.b64encode(hashlib.sha512(rng.randbytes(8)).digest()).decode()}"'
    yield f"    --hash=sha256:{hashlib.sha256(rng.randbytes(8)).hexdigest()}"
    yield f'checksum = "{hashlib.sha256(rng.randbytes(8)).hexdigest()}"'
    yield f"golang.org/x/crypto v0.21.0 h1:{_b64(rng, 32)}"
    yield f"image: ghcr.io/org/app@sha256:{hashlib.sha256(rng.randbytes(8)).hexdigest()}"
    yield f"data:image/png;base64,{_b64(rng, rng.randint(60, 600))}"
    yield f"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{_b64(rng, 32)[:43]} dev@laptop"
    yield f"Content-MD5: {_b64(rng, 16)}"
    yield f'ETag: "{_sha(rng, 32)}"'
    yield f"tests/test_auth.py::test_token_expiry[{_sha(rng, 8)}] PASSED"
    yield f'session_key_prefix = "sess_{rng.randrange(100)}"'
    yield f'cache_key = "{_sha(rng, 32)}"'
    yield f"primary_key: {rng.randrange(10**6)}"
    yield f"max_tokens={rng.choice((256, 1024, 4096))}"
    yield f"arn:aws:iam::{rng.randrange(10**11, 10**12)}:role/deploy-{rng.randrange(99)}"
    yield f"public_key: {_sha(rng, 64)}"
    yield (
        "-----BEGIN CERTIFICATE-----\n"
        + "\n".join(_b64(rng, 48) for _ in range(rng.randint(3, 8)))
        + "\n-----END CERTIFICATE-----"
    )
    yield "-----BEGIN PUBLIC KEY-----\n" + _b64(rng, 48) + "\n" + _b64(rng, 24) + "\n-----END PUBLIC KEY-----"


def corpus(seed: int = 6, per_format: int = 40, clean_samples: int = 300) -> tuple[list[Sample], list[str]]:
    """The labelled corpus: positives (each format in each kind of context) and negatives.

    Args:
        seed: Fixes every random choice, so the corpus is the same on every run.
        per_format: Positive samples per format.
        clean_samples: Snippets of clean tool output among the negatives.

    Returns:
        The positive samples, and the negative texts (look-alikes, then clean output).
    """
    rng = random.Random(seed)  # noqa: S311  (fake data, reproducible on purpose)
    positives = [place(fmt, rng) for fmt in FORMATS for _ in range(per_format)]
    negatives = list(lookalikes())
    for _ in range(8):
        negatives.extend(generated_lookalikes(rng))
    negatives.extend(rng.choice(CLEAN_BLOCKS)(rng) for _ in range(clean_samples))
    return positives, negatives


def document(rng: random.Random, size: int, every: int = 3 * 1024) -> Sample:
    """About `size` characters of tool output with a secret about every `every` characters.

    Args:
        rng: The source of every choice.
        size: Characters wanted.
        every: Mean distance between secrets.

    Returns:
        The text, with the secrets labelled.
    """
    pieces: list[str] = []
    labels: list[tuple[int, int, str]] = []
    total = 0
    while total < size:
        clean = clean_output(rng, rng.randint(every // 2, every * 3 // 2))
        pieces.append(clean)
        total += len(clean)
        sample = place(rng.choice(FORMATS), rng)
        labels.extend((start + total, end + total, name) for start, end, name in sample.secrets)
        pieces.append(sample.text + "\n")
        total += len(sample.text) + 1
    return Sample("".join(pieces), tuple(labels))


def fully_masked(secrets: Sequence[tuple[int, int, str]], findings: Sequence[tuple[int, int]]) -> list[bool]:
    """For each labelled secret, whether one finding covers it whole."""
    return [
        any(f_start <= start and end <= f_end for f_start, f_end in findings) for start, end, _ in secrets
    ]
