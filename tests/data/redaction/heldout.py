"""Two held-out corpora the detectors were not tuned on, and a keyword-dense bulk of clean output.

`named_families()`: the families a larger corpus showed missing (session cookies, bearer headers,
passwords on command lines, env listings, `.npmrc`, `.pypirc`, docker and kube configs, Django,
FCM, AWS outside `KEY=value`, and a few providers). `other_formats()`: documented formats of the
public rule sets that no detector was written against by name. Every value is drawn at random from
the format's grammar; no real secret is stored.
"""

from __future__ import annotations

import random
import string
from typing import Final

from secret_corpus import B62, B64, HEX, URLSAFE, Chars, Format, OneOf, Sample, place

LOWER_DIGITS: Final = string.ascii_lowercase + string.digits
UPPER_DIGITS: Final = string.ascii_uppercase + string.digits
PASSWORD: Final = Chars(B62 + "!@%^*_+-=.~", 10, 24)


def _uuid() -> tuple[Chars | str, ...]:
    return (
        Chars(HEX, 8, 8),
        "-",
        Chars(HEX, 4, 4),
        "-4",
        Chars(HEX, 3, 3),
        "-a",
        Chars(HEX, 3, 3),
        "-",
        Chars(HEX, 12, 12),
    )


NAMED_FAMILIES: Final[tuple[Format, ...]] = (
    Format("npmrc_password", "password", (Chars(B64, 20, 40),), ("//registry.example.com/:_password={}",)),
    Format(
        "heroku_netrc",
        "password",
        _uuid(),
        ("machine api.heroku.com\n  login dev@example.com\n  password {}",),
    ),
    Format("cloudflare_auth_key", "token", (Chars(HEX, 37, 37),), ("X-Auth-Key: {}",)),
    Format("okta_ssws", "authorization", ("00", Chars(URLSAFE, 40, 40)), ("Authorization: SSWS {}",)),
    Format(
        "django_session_cookie",
        "session_cookie",
        (Chars(LOWER_DIGITS, 32, 32),),
        (
            "Cookie: csrftoken=abc; sessionid={}",
            "Set-Cookie: sessionid={}; expires=Thu, 01 Jan 2026 00:00:00 GMT; HttpOnly; Path=/",
            "> Cookie: sessionid={}",
            "curl -b 'sessionid={}' https://app.example.com/admin/",
        ),
    ),
    Format(
        "express_session_cookie",
        "session_cookie",
        ("s%3A", Chars(URLSAFE, 32, 32), ".", Chars(B64, 43, 43)),
        (
            "Set-Cookie: connect.sid={}; Path=/; HttpOnly",
            "Cookie: connect.sid={}",
        ),
    ),
    Format(
        "laravel_session_cookie",
        "session_cookie",
        ("eyJpdiI6", Chars(B62, 120, 200), "%3D"),
        (
            "Set-Cookie: laravel_session={}; expires=Mon, 01-Jan-2026 00:00:00 GMT; path=/; httponly",
            "Cookie: XSRF-TOKEN=abc; laravel_session={}",
        ),
    ),
    Format(
        "java_session_cookie",
        "session_cookie",
        (Chars("0123456789ABCDEF", 32, 32),),
        (
            "Set-Cookie: JSESSIONID={}; Path=/; Secure; HttpOnly",
            "Cookie: JSESSIONID={}",
        ),
    ),
    Format(
        "php_session_cookie",
        "session_cookie",
        (Chars(LOWER_DIGITS, 26, 26),),
        (
            "Set-Cookie: PHPSESSID={}; path=/",
            "Cookie: PHPSESSID={}; lang=en",
        ),
    ),
    Format(
        "rails_session_cookie",
        "session_cookie",
        (Chars(B64, 80, 160), "--", Chars(HEX, 40, 40)),
        (
            "Set-Cookie: _myapp_session={}; path=/; HttpOnly",
            "Cookie: _shop_session={}",
        ),
    ),
    Format(
        "bearer_header",
        "authorization",
        (Chars(URLSAFE, 40, 64),),
        (
            "> Authorization: Bearer {}",
            "-H 'Authorization: Bearer {}'",
            "headers = {{'Authorization': 'Bearer {}'}}",
            "authorization: Bearer {}",
        ),
    ),
    Format(
        "twitter_app_bearer",
        "twitter_bearer_token",
        ("AAAAAAAAAAAAAAAAAAAAA", Chars(B62, 25, 25), "%3D", Chars(B62, 50, 50)),
        (
            "> Authorization: Bearer {}",
            "TWITTER_BEARER_TOKEN={}",
            "{}",
        ),
    ),
    Format(
        "http_basic",
        "authorization",
        (Chars(B64, 16, 40), OneOf(("", "=", "=="))),
        (
            "> Authorization: Basic {}",
            '-H "Authorization: Basic {}"',
        ),
    ),
    Format(
        "mysql_p",
        "password",
        (PASSWORD,),
        (
            "$ mysql -u root -p{} -h db.internal app",
            "mysqldump -uadmin -p{} --all-databases > dump.sql",
            "+ mysql --user=app --password={} app < schema.sql",
        ),
    ),
    Format(
        "pgpassword",
        "password",
        (PASSWORD,),
        (
            "+ PGPASSWORD={} psql -h db -U app",
            "$ PGPASSWORD='{}' pg_dump app",
            "export PGPASSWORD={}",
        ),
    ),
    Format(
        "sshpass",
        "password",
        (PASSWORD,),
        (
            "sshpass -p {} ssh deploy@10.0.0.5",
            "sshpass -p '{}' scp build.tgz deploy@host:/srv",
        ),
    ),
    Format(
        "password_flag",
        "password",
        (PASSWORD,),
        (
            "docker login -u ci --password {} registry.example.com",
            "redis-cli -a {} ping",
            'psql "host=db user=app password={} dbname=app"',
        ),
    ),
    Format(
        "env_listing",
        "password",
        (PASSWORD,),
        (
            "DB_PASSWORD={}",
            '"Env": ["PATH=/usr/bin", "POSTGRES_PASSWORD={}", "LANG=C"],',
            "      POSTGRES_PASSWORD:  {}",
            "  - name: DB_PASSWORD\n    value: {}",
            'declare -x MYSQL_ROOT_PASSWORD="{}"',
            "Run export REDIS_PASSWORD={}",
        ),
    ),
    Format(
        "npmrc_token",
        "token",
        (Chars(B62, 36, 36),),
        (
            "//registry.npmjs.org/:_authToken={}",
            "//npm.pkg.github.com/:_authToken={}",
        ),
    ),
    Format(
        "npmrc_auth",
        "token",
        (Chars(B64, 20, 40), OneOf(("", "="))),
        (
            "_auth={}",
            "//registry.example.com/:_auth={}",
        ),
    ),
    Format(
        "pypirc",
        "password",
        (PASSWORD,),
        (
            "[pypi]\nusername = __token__\npassword = {}",
            "[testpypi]\nrepository = https://test.pypi.org/legacy/\nusername = dev\npassword: {}",
        ),
    ),
    Format(
        "docker_auth",
        "token",
        (Chars(B64, 24, 60), OneOf(("", "=", "=="))),
        (
            '{{"auths": {{"https://index.docker.io/v1/": {{"auth": "{}"}}}}}}',
            '    "ghcr.io": {{\n      "auth": "{}"\n    }}',
        ),
    ),
    Format(
        "kubeconfig_token",
        "token",
        (Chars(URLSAFE, 40, 64),),
        (
            "users:\n- name: admin\n  user:\n    token: {}",
            "    token: {}",
            "kubectl --token={} get pods",
        ),
    ),
    Format(
        "django_secret_key",
        "django_secret_key",
        ("django-insecure-", Chars(B62 + "!@#%^&*(-_=+)", 50, 50)),
        (
            "SECRET_KEY = '{}'",
            "DJANGO_SECRET_KEY={}",
        ),
    ),
    Format(
        "django_secret_key_plain",
        "secret",
        (Chars(LOWER_DIGITS + "!@%^&*-_=+", 50, 50),),
        (
            "SECRET_KEY = '{}'",
            'SECRET_KEY = "{}"',
        ),
    ),
    Format(
        "fcm_server_key",
        "fcm_server_key",
        ("AAAA", Chars(URLSAFE, 7, 7), ":APA91b", Chars(URLSAFE, 134, 134)),
        (),
    ),
    Format(
        "aws_secret_console",
        "aws_secret_access_key",
        (Chars(B62 + "/+", 40, 40),),
        (
            "AWS Secret Access Key [None]: {}",
            '    "SecretAccessKey": "{}",',
            "aws_secret_access_key = {}",
            "Secret access key: {}",
        ),
    ),
    Format(
        "aws_session_token",
        "aws_session_token",
        (OneOf(("FwoGZXIvYXdzE", "IQoJb3JpZ2luX2Vj")), Chars(B64, 200, 300)),
        (
            '    "SessionToken": "{}",',
            "aws_session_token = {}",
            "AWS_SESSION_TOKEN={}",
            "{}",
        ),
    ),
    Format(
        "datadog_header",
        "datadog_api_key",
        (Chars(HEX, 32, 32),),
        (
            '-H "DD-API-KEY: {}"',
            "DD_API_KEY={}",
            "datadog_api_key: {}",
        ),
    ),
    Format("notion_secret", "notion_token", ("secret_", Chars(B62, 43, 43)), ()),
    Format(
        "facebook_token",
        "facebook_access_token",
        ("EAA", OneOf(("B", "C", "G", "J")), Chars(B62, 100, 180)),
        (),
    ),
    Format(
        "facebook_app_secret",
        "secret",
        (Chars(HEX, 32, 32),),
        (
            "FACEBOOK_APP_SECRET={}",
            "facebook_secret: {}",
        ),
    ),
    Format(
        "twilio_auth_token",
        "twilio_auth_token",
        (Chars(HEX, 32, 32),),
        (
            "TWILIO_AUTH_TOKEN={}",
            "twilio_auth_token: '{}'",
            "client = Client(account_sid, '{}')  # twilio",
        ),
    ),
    Format("brevo_key", "brevo_api_key", ("xkeysib-", Chars(HEX, 64, 64), "-", Chars(B62, 16, 16)), ()),
    Format("brevo_smtp", "brevo_api_key", ("xsmtpsib-", Chars(HEX, 64, 64), "-", Chars(B62, 16, 16)), ()),
    Format(
        "heroku_uuid",
        "api_key",
        _uuid(),
        (
            "HEROKU_API_KEY={}",
            "heroku_api_key: {}",
        ),
    ),
    Format(
        "cloudflare_token",
        "token",
        (Chars(URLSAFE, 40, 40),),
        (
            "CLOUDFLARE_API_TOKEN={}",
            "CF_API_TOKEN={}",
            'cloudflare_api_token = "{}"',
        ),
    ),
    Format(
        "cloudflare_global",
        "api_key",
        (Chars(HEX, 37, 37),),
        ("CF_API_KEY={}",),
    ),
)


OTHER_FORMATS: Final[tuple[Format, ...]] = (
    Format("airtable_pat", "airtable_token", ("pat", Chars(B62, 14, 14), ".", Chars(HEX, 64, 64)), ()),
    Format("adafruit_key", "adafruit_api_key", ("aio_", Chars(B62, 28, 28)), ()),
    Format("clojars", "clojars_token", ("CLOJARS_", Chars(LOWER_DIGITS, 60, 60)), ()),
    Format("duffel", "duffel_token", ("duffel_", OneOf(("test", "live")), "_", Chars(URLSAFE, 43, 43)), ()),
    Format("easypost", "easypost_api_key", ("EZAK", Chars(LOWER_DIGITS, 54, 54)), ()),
    Format("flutterwave", "flutterwave_key", ("FLWSECK_TEST-", Chars(HEX, 32, 32), "-X"), ()),
    Format("frameio", "frameio_token", ("fio-u-", Chars(URLSAFE, 64, 64)), ()),
    Format("readme", "readme_api_key", ("rdme_", Chars(LOWER_DIGITS, 70, 70)), ()),
    Format("scalingo", "scalingo_token", ("tk-us-", Chars(URLSAFE, 48, 48)), ()),
    Format("shippo", "shippo_token", ("shippo_", OneOf(("live", "test")), "_", Chars(HEX, 40, 40)), ()),
    Format("sourcegraph", "sourcegraph_token", ("sgp_", Chars(HEX, 40, 40)), ()),
    Format("typeform", "typeform_token", ("tfp_", Chars(URLSAFE, 59, 59)), ()),
    Format("octopus", "octopus_api_key", ("API-", Chars(UPPER_DIGITS, 26, 26)), ()),
    Format("infracost", "infracost_token", ("ico-", Chars(B62, 32, 32)), ()),
    Format(
        "settlemint", "settlemint_token", ("sm_", OneOf(("pat", "aat", "sat")), "_", Chars(B62, 16, 16)), ()
    ),
    Format("newrelic_insert", "newrelic_key", ("NRII-", Chars(URLSAFE, 32, 32)), ()),
    Format("yandex_oauth", "yandex_token", ("y0_", Chars(URLSAFE, 55, 55)), ()),
    Format("yandex_api", "yandex_token", ("AQVN", Chars(URLSAFE, 35, 38)), ()),
    Format("artifactory_reference", "artifactory_token", ("cmVmdGtuOjAxOj", Chars(B62, 50, 50)), ()),
    Format("clickhouse", "clickhouse_key", ("4b1d", Chars(B62, 38, 38)), ()),
    Format("openai_project", "openai_api_key", ("sk-proj-", Chars(URLSAFE, 80, 120)), ()),
    Format("anthropic_admin", "anthropic_api_key", ("sk-ant-admin01-", Chars(URLSAFE, 93, 93), "AA"), ()),
    Format(
        "harness_pat",
        "harness_token",
        ("pat.", Chars(URLSAFE, 22, 22), ".", Chars(HEX, 24, 24), ".", Chars(B62, 20, 20)),
        (),
    ),
    Format(
        "github_oauth_app_secret",
        "secret",
        (Chars(HEX, 40, 40),),
        (
            "GITHUB_CLIENT_SECRET={}",
            "client_secret: {}",
        ),
    ),
    Format(
        "okta_token",
        "okta_token",
        ("00", Chars(URLSAFE, 40, 40)),
        (
            "OKTA_API_TOKEN={}",
            "okta_token: {}",
        ),
    ),
    Format("sumo", "sumologic_key", ("su", Chars(B62, 12, 12)), ("SUMO_ACCESS_ID={}",)),
    Format(
        "mongodb_uri",
        "url_password",
        (PASSWORD,),
        (
            "mongodb+srv://app:{}@cluster0.abcde.mongodb.net/db",
            "amqp://guest:{}@rabbit:5672/",
        ),
    ),
    Format(
        "jdbc_password",
        "password",
        (PASSWORD,),
        (
            "jdbc:sqlserver://db:1433;databaseName=app;user=sa;password={};",
            "Server=db;Database=app;User Id=sa;Password={};",
        ),
    ),
)


def corpus(formats: tuple[Format, ...], seed: int, per_format: int = 40) -> list[Sample]:
    """`per_format` labelled samples of each format, in its contexts (or the neutral ones)."""
    rng = random.Random(seed)  # noqa: S311  (fake data, reproducible on purpose)
    return [place(fmt, rng) for fmt in formats for _ in range(per_format)]


def named_families(seed: int = 21) -> list[Sample]:
    return corpus(NAMED_FAMILIES, seed)


def other_formats(seed: int = 22) -> list[Sample]:
    return corpus(OTHER_FORMATS, seed)


_WORDS: Final = (
    "token",
    "secret",
    "password",
    "api_key",
    "auth",
    "credential",
    "passwd",
    "session",
    "bearer",
    "private_key",
    "access_token",
    "secret_key",
)
_STANDINS: Final = ("None", "<redacted>", "expired", "${TOKEN}", "***", "null", "True", "missing", "[]")


def _pytest_block(rng: random.Random) -> str:
    return "".join(
        f"tests/test_{rng.choice(_WORDS)}s.py::test_{rng.choice(_WORDS)}_"
        f"{rng.choice(('refresh', 'expiry', 'rotation', 'is_masked', 'invalid'))}_{rng.choice(_WORDS)}"
        f"[{rng.choice(_WORDS)}-{rng.randrange(9)}] {rng.choice(('PASSED', 'FAILED', 'SKIPPED'))} "
        f"[{rng.randrange(100):3d}%]\n"
        for _ in range(20)
    )


def _log_block(rng: random.Random) -> str:
    return "".join(
        f"2024-05-01 12:00:{rng.randrange(60):02d},{rng.randrange(1000):03d} INFO auth: refreshed "
        f"token={rng.choice(_STANDINS)} user={rng.randrange(999)} "
        f"password_ok={rng.choice(('True', 'False'))} "
        f"secret_name=db-{rng.randrange(9)} token_ttl=3600 api_key_id={rng.randrange(99)}\n"
        for _ in range(20)
    )


def _code_block(rng: random.Random) -> str:
    name = rng.choice(_WORDS)
    return (
        f"def check_{name}(self, password: str, token: str | None = None) -> bool:\n"
        f"    secret = self.get_secret(token)\n"
        f"    api_key = os.environ['API_KEY']\n"
        f"    if not password:\n"
        f"        raise ValueError('password required')\n"
        f"    {name}_hash = hash_password(password, salt=self.salt)\n"
        f"    return hmac.compare_digest(secret, {name}_hash)\n"
    )


def dense_output(rng: random.Random, size: int) -> str:
    """About `size` characters of clean tool output full of `token`, `secret`, `password`, `api_key`."""
    blocks: list[str] = []
    total = 0
    makers = (_pytest_block, _log_block, _code_block)
    while total < size:
        block = rng.choice(makers)(rng)
        blocks.append(block)
        total += len(block)
    return "".join(blocks)
