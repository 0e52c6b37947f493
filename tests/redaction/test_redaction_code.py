"""Code is not a value, and literals that cannot be secrets are left alone: each boundary both ways.

Each row is a text the redactor must leave as it is (code, a size, a placeholder, a public key, test
data) and, beside it, a real secret in the same place, which must be masked.
"""

from __future__ import annotations

import pytest

from oct_mcp.redaction import redact, redact_value
from oct_mcp.redaction.code import expression

SECRET = "Zx8Qw2Lp9Rt4Yu6Io1Pa"  # noqa: S105  (made up: the shape of a generated secret)
"""A generated-looking value: 20 characters, both cases and digits."""

# (left alone, a real secret in the same place). The secret text is the one the mask must cover.
CODE_SHAPES = [
    pytest.param('self.password = password or ""', f'self.password = "{SECRET}" or ""', id="or-default"),
    pytest.param('passphrase = url.password or ""', f'passphrase = "{SECRET}"', id="attribute-or"),
    pytest.param('token = prefix + " "', f'token = prefix + "{SECRET}"', id="concatenation"),
    pytest.param(
        "expected_key = AWSS3Storage.prefix + folder + key",
        f'expected_key = "{SECRET}"',
        id="key-name-concatenation",
    ),
    pytest.param(
        "private_key: Ed25519PrivateKey | Ed448PrivateKey",
        f"private_key: {SECRET}",
        id="annotation",
    ),
    pytest.param("secret_key = weights.T", "secret_key = XpyyP60AQ.Q", id="one-letter-attribute"),
    pytest.param(
        'new_url = url + "&access_token=" + self.token["access_token"]',
        f'new_url = url + "&access_token={SECRET}"',
        id="field-inside-a-string-then-code",
    ),
    pytest.param(
        '"https://aka.ms/GetLabSecret?Secret=" + (lab_name or "msidlabXYZ"),',
        f'"https://aka.ms/GetLabSecret?Secret={SECRET}",',
        id="query-inside-a-string-then-code",
    ),
    pytest.param(
        "if not hashed_password == user.hashed_password:",
        f'if not hashed_password == "{SECRET}":',
        id="comparison-before-a-block-colon",
    ),
    pytest.param(
        "SERVER_SIDE_ENCRYPTION_KEY: AWS_HEADER_PREFIX +",
        f'SERVER_SIDE_ENCRYPTION_KEY: "{SECRET}" +',
        id="operator-carries-the-line-on",
    ),
    pytest.param(
        'pkcs8_key["privateKey"] = pkcs1_key',
        f'pkcs8_key["privateKey"] = "{SECRET}"',
        id="name-with-digits-under-a-quoted-key",
    ),
    pytest.param(
        '{"X-aws-ec2-metadata-token": imdsv2_session_token}',
        f'{{"X-aws-ec2-metadata-token": {SECRET}}}',
        id="name-with-digits-as-a-map-item",
    ),
    pytest.param(
        "oauth2client.client.OAuth2Credentials: _convert_oauth2_credentials,",
        f"oauth2client.client.OAuth2Credentials: {SECRET},",
        id="private-name-as-a-map-item",
    ),
    pytest.param(
        "SEC_WEBSOCKET_KEY1: istr = hdrs.SEC_WEBSOCKET_KEY1,",
        f'SIGNING_KEY1: istr = "{SECRET}",',
        id="attribute-chain",
    ),
    pytest.param(
        'creds: f"deploy with token {SECRET}"',
        f'creds: f"{SECRET}"',
        id="f-string-placeholder",
    ),
    pytest.param(
        'secret = "sk-ant-api03-" + "B" * 40',
        f'secret = "{SECRET}" + "B" * 40',
        id="prefix-literal-concatenated",
    ),
    pytest.param(
        '"""A stored bearer token: `sha256:` and 64 hex digits."""',
        f'"""A stored bearer token: `{SECRET}` and 64 hex digits."""',
        id="docstring-prefix",
    ),
    pytest.param("gss_auth=UseGSSAPI,", "gss_auth=Xk9mQ2pLzR4t,", id="keyword-argument"),
    pytest.param(
        "if username == user and password == provided_password:",
        f'if password == "{SECRET}":',
        id="comparison",
    ),
    pytest.param(
        "private_key_value = 94761803665136558137557783047955027733968  # why",
        f"private_key_value = {SECRET}  # why",
        id="trailing-comment",
    ),
    pytest.param(
        '"machine example.com login me password pass\\n",',
        "machine h login me password Xk9mQ2pLzR4t",
        id="netrc",
    ),
    pytest.param("const token = prefix + suffix;", f'const token = "{SECRET}";', id="javascript"),
    pytest.param("token: header ?? fallback", f"token: {SECRET}", id="javascript-nullish"),
    pytest.param(
        "for(e in{radio:!0,checkbox:!0,file:!0,password:!0,image:!0})b.pseudos[e]=de(e);",
        f"for(e in{{radio:!0,file:!0,password:{SECRET},image:!0}})b.pseudos[e]=de(e);",
        id="minified-object-entries",
    ),
]

LITERAL_KINDS = [
    pytest.param("token:      273 bytes", f"token:      {SECRET}", id="kubectl-size"),
    # RFC 7230's grammar quoted in an HTTP library's comment; a token of that shape is no rule name.
    pytest.param("#  token = 1*tchar", "#  token = 1*tcH4r9ZqW", id="abnf-repetition"),
    pytest.param("# api_key = 2*HEXDIG", "# api_key = 2*HeXd1G7q", id="abnf-core-rule"),
    pytest.param('password = "xxxx-xxxx-xxxx"', f'password = "{SECRET}"', id="xxxx"),
    pytest.param('api_key = "EXAMPLE_KEY_HERE"', f'api_key = "{SECRET}"', id="example"),
    pytest.param('token = "your-token"', f'token = "{SECRET}"', id="your-token"),
    pytest.param("token = <token>", f"token = {SECRET}", id="angle-placeholder"),
    pytest.param("PASSWORD=${DB_PASSWORD}", f"PASSWORD={SECRET}", id="env-reference"),
    pytest.param(
        "NEXT_PUBLIC_POSTHOG_KEY=phc_aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3xY5z",
        "NEXT_PUBLIC_STRIPE_KEY=sk_live_51HqLyjWDarjtT1zdp7dcXYZabc12345",
        id="next-public",
    ),
    pytest.param(
        "POSTHOG_KEY=phc_aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3xY5z",
        "POSTHOG_KEY=phx_aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3xY5z",
        id="posthog-project-key",
    ),
    pytest.param('password = "1234"', 'password = "8150274"', id="short"),
    pytest.param(
        "events={'(?i)password':'secret\\\\n'}",
        "events={'(?i)password':'Xk9#mQ2pLz\\\\n'}",
        id="placeholder-with-escaped-newline",
    ),
    pytest.param("password = 'secret\\n'", "password = 'Xk9#mQ2pLz\\n'", id="placeholder-with-newline"),
    pytest.param(
        "ssh.login('server', 'me', password='s3cret')",
        "ssh.login('server', 'me', password='s3cRet9xQ')",
        id="placeholder-in-digits",
    ),
    pytest.param("PASSWORD=p4ssw0rd", "PASSWORD=p4ssw0rd7Kq", id="placeholder-in-digits-env"),
    pytest.param(
        "{'USER': 'jdoe', 'PASS': 'sec==ret'}",
        "{'USER': 'jdoe', 'PASS': 'sec==ret2'}",
        id="placeholder-with-marks-between",
    ),
    pytest.param("PASSWORD=p@ss-word", "PASSWORD=p@ss-word9Kq", id="placeholder-leet-and-marks"),
    pytest.param(
        'sess.fetch_token(url, username="username1", password="password1")',
        'sess.fetch_token(url, username="username1", password="password1234")',
        id="placeholder-and-a-count",
    ),
    pytest.param(
        'self.fake_body("oauth_token=foo&oauth_token_secret=bar")',
        'self.fake_body("oauth_token=lsdkfol23w54jlksdef&oauth_token_secret=bar")',
        id="short-value-before-the-next-parameter",
    ),
    pytest.param('token = "Bad-Token"', 'token = "Bad-T0ken9x"', id="title-words"),
    pytest.param(
        'assert settings.password == "entered pw"',
        'assert settings.password == "entered pw again"',
        id="two-words",
    ),
    pytest.param('password = "some:password"', 'password = "some:Pa55word"', id="named-parts"),
    pytest.param('auth="foo:bar"', 'auth="foo:Xk9mQ2pL"', id="user-pass-pair"),
    pytest.param(
        'Url("http", auth="user%22:quoted", host="example.com")',
        'Url("http", auth="user%22:quoted9", host="example.com")',
        id="user-pass-pair-any-user",
    ),
    pytest.param('auth="user%22:quoted"', 'auth="k8Qw2Lp9Rt4Yu6Io:abc"', id="user-pass-pair-key-as-user"),
    pytest.param(
        'headers={"Authorization": "Basic Zm9vOmJhcg=="}',
        'headers={"Authorization": "Basic dXNlcjpYazltUTJwTHpSNHQ="}',
        id="basic-sample",
    ),
    pytest.param(
        "broker_url = 'amqp://guest:guest@localhost:5672//'",
        "broker_url = 'amqp://guest:Xk9mQ2pL@localhost:5672//'",
        id="url-local-default",
    ),
    pytest.param(
        "broker_url = 'amqp://guest:guest@foobar:1234//'",
        "broker_url = 'amqp://guest:guest1@foobar:1234//'",
        id="url-password-repeats-user",
    ),
    pytest.param(
        "'redis://:bosco@vandelay.com:123//1'", "'redis://:boscos@vandelay.com:123//1'", id="url-short-word"
    ),
    pytest.param(
        'make_request("get", "http://nkim:1234@python.org")',
        'make_request("get", "http://nkim:12a4@python.org")',
        id="url-short-number",
    ),
    pytest.param(
        "GET http://a:bo@host.org:1234/toto",
        "GET http://a:b!&*$@host.org:1234/toto",
        id="url-short-with-symbols",
    ),
    pytest.param(
        "ssh://:clearpassword@host:22",
        "ssh://:clearpassw0rd9@host:22",
        id="url-self-named",
    ),
    pytest.param("    proxy_auth=None,\\", "    proxy_auth=Xk9mQ2pLzR4t,\\", id="keyword-argument-continued"),
    pytest.param(
        "mysql://scott:tigress@example.com/foo",
        "mysql://scott:tigress@db.internal/foo",
        id="url-example-host",
    ),
    pytest.param("'Password': 'hunter2',", "'Password': 'hunter2Kq9',", id="stock-example-password"),
    pytest.param(
        '{"access_token":"2YotnFZFEjr1zCsicMWpAA","refresh_token":"tGzv3JOkF0XG5Qx2TlKWIA"}',
        '{"access_token":"2YotnFZFEjr1zCsicMWpAB","refresh_token":"tGzv3JOkF0XG5Qx2TlKWIA"}',
        id="rfc6749-token-response",
    ),
    pytest.param(
        "Authorization: Bearer mF_9.B5f-4.1JqM",
        "Authorization: Bearer mF_9.B5f-4.1JqMx9",
        id="rfc6750-bearer",
    ),
    pytest.param(
        "Location: https://client.example.com/cb?code=SplxlOBeZQQYbYS6WxSbIA&state=xyz",
        "Location: https://client.example.com/cb?code=SplxlOBeZQQYbYS6WxSbIB&state=xyz",
        id="rfc6749-code-in-a-query",
    ),
    pytest.param(
        "Authorization: Basic czZCaGRSa3F0MzpnWDFmQmF0M2JW",
        "Authorization: Basic czZCaGRSa3F0MzpnWDFmQmF0M2JX",
        id="rfc6749-basic",
    ),
    pytest.param(
        '"otpauth://totp/Example:alice@google.com?secret=JBSWY3DPEHPK3PXP&issuer=Example"',
        '"otpauth://totp/Example:alice@google.com?secret=JBSWY3DPEHPK3PXQ&issuer=Example"',
        id="totp-key-uri-example",
    ),
    pytest.param(
        "'X-Amz-Credential': '%s/%s/%s/%s/aws4_request' % (",
        "'X-Amz-Credential': '%s/Zx8Qw2Lp9Rt4Yu6Io1Pa/aws4_request' % (",
        id="printf-template",
    ),
    pytest.param(
        "os.environ['http_proxy'] = \"http://john.doe:p4ssw0rd@127.0.0.1:8180\"",
        "os.environ['http_proxy'] = \"http://john.doe:p4ssw0rd9Kq@127.0.0.1:8180\"",
        id="url-password-spelt-placeholder",
    ),
    pytest.param(
        'oauth_consumer_key="9djdj82h48djs9d2", oauth_token="kkk9d7dh3k39sjv7",',
        'oauth_consumer_key="9djdj82h48djs9d2", oauth_token="kkk9d7dh3k39sjv8",',
        id="rfc5849-header",
    ),
    pytest.param(
        "http://JeremyCline:Hunter2@example.org:8080/",
        "http://JeremyCline:Hunter2Kq9@example.org:8080/",
        id="url-stock-example-password",
    ),
    pytest.param("'password': 'GR?XGR?XGR?XGR?X'", "'password': 'GR?XGR?XGR?XGR?Xk9'", id="repeated-unit"),
    pytest.param(
        'Url("http", auth="user%40email.com:password", host="example.com")',
        'Url("http", auth="user%40email.com:Pa55w0rd%21", host="example.com")',
        id="percent-escaped-named-parts",
    ),
    pytest.param('auth="%E3%83%92:%E3%82%AD",', 'auth="%E3%83%92:Xk9mQ2pL%21",', id="percent-escaped-short"),
    pytest.param(
        "AccountKey=Lou...bzg==;EndpointSuffix=core.windows.net",
        "AccountKey=LouQ2pL9bzgXk9mQ2pLzR4tW8bzg==;EndpointSuffix=core.windows.net",
        id="cut-short-where-shown",
    ),
    pytest.param(
        "s3_secret_access_key = 's3-secret-access-key'",
        "s3_secret_access_key = 's3-secret-access-key-7Kq9'",
        id="own-name-again",
    ),
    pytest.param(
        '"SEC-WEBSOCKET-KEY": "dGhlIHNhbXBsZSBub25jZQ==",',
        '"SEC-WEBSOCKET-KEYS": "dGhlIHNhbXBsZSBub25jZQ==",',
        id="websocket-handshake-nonce",
    ),
    pytest.param(
        'WS_KEY: Final[bytes] = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"',
        'WS_KEY: Final[bytes] = b"358EAFA5-E914-47DA-95CA-C5AB0DC85B11"',
        id="standard-constant",
    ),
]


@pytest.mark.parametrize(("alone", "secret"), CODE_SHAPES)
def test_a_value_that_is_code_is_left_alone_and_a_literal_secret_there_is_masked(
    alone: str, secret: str
) -> None:
    assert redact(alone) == (alone, ())

    masked, findings = redact(secret)

    assert findings
    assert "[REDACTED:" in masked


@pytest.mark.parametrize(("alone", "secret"), LITERAL_KINDS)
def test_a_literal_that_cannot_be_a_secret_is_left_alone_and_a_secret_there_is_masked(
    alone: str, secret: str
) -> None:
    assert redact(alone) == (alone, ())

    masked, findings = redact(secret)

    assert findings
    assert "[REDACTED:" in masked


def test_a_secret_literal_inside_an_expression_is_masked_alone() -> None:
    text = f'token = prefix + "{SECRET}" + suffix'

    assert redact(text)[0] == 'token = prefix + "[REDACTED:token]" + suffix'


def test_code_inside_a_longer_file_is_left_alone_with_the_secret_beside_it_masked() -> None:
    text = (
        "class Client:\n"
        "    def __init__(self, password=None):\n"
        '        self.password = password or ""\n'
        f'        self.api_key = "{SECRET}"\n'
    )

    masked, findings = redact(text)

    assert masked == text.replace(SECRET, "[REDACTED:api_key]")
    assert len(findings) == 1


@pytest.mark.parametrize(
    "fragment",
    [
        'password = """starts a string the cut left open',
        "password = call(first,",
        "password = $(cat secret.txt) || true",
        "password = '",
    ],
)
def test_the_token_reader_reads_a_fragment_as_no_expression_so_the_old_rules_decide(fragment: str) -> None:
    start = fragment.index("=") + 2

    assert expression(fragment, start) is None


def test_a_value_that_does_not_read_as_python_is_judged_as_before() -> None:
    # `$` is no Python token: the reader gives up, and the old rules mask a literal-looking value.
    assert expression(f"password = ${SECRET} + x", len("password = ")) is None
    assert expression(f"{SECRET}", 0) is None


@pytest.mark.parametrize(
    ("value", "code"),
    [
        ("header ?? fallback", True),
        ("ok ? left : right", True),
        ("not configured", True),
        ("url.password", True),
        ("hdrs.SEC_WEBSOCKET_KEY1", True),
        ('f"{scheme} {token}" + suffix', True),
        ('b"prefix" + rest', True),
        ("obj.Xk9mQ2pLzR4t", False),
        ("Ab+cd/ef==", False),
        ("hunter2Xq9", False),
        ("correct horse battery staple", False),
    ],
)
def test_the_token_reader_tells_an_expression_from_a_value(value: str, code: bool) -> None:
    assert (expression(value, 0) is not None) == code


def test_the_strings_of_an_expression_are_given_without_prefix_quotes_or_templates() -> None:
    text = 'x = b"Zx8Qw2Lp9Rt4Yu6Io1Pa" + f"{a}" + """long"""'

    found = expression(text, 4)

    assert found is not None
    assert [text[start:end] for start, end in found.strings] == [SECRET, "long"]


# A password with a dot reads like an attribute (`aabcd.f0`): where the line is an entry of a .env,
# INI or YAML file, or the attribute is no name, it is masked; code around the same shape is not.
DOTTED_PASSWORDS = [
    pytest.param("DB_PASSWORD=aabcd.f0", "aabcd.f0", id="env"),
    pytest.param("export DB_PASSWORD=aabcd.f0", "aabcd.f0", id="env-export"),
    pytest.param("passwd=aabcd.f0\nuser=app", "aabcd.f0", id="ini"),
    pytest.param("    db_password: aabcd.f0", "aabcd.f0", id="yaml"),
    pytest.param("password = aabcd.f0", "aabcd.f0", id="letter-and-digit-attribute"),
]
DOTTED_CODE = [
    pytest.param("    password=settings.db,", id="keyword-argument"),
    pytest.param("connect(password=settings.db_password)", id="call"),
    pytest.param("    proxy_auth=None,\\", id="continued-argument"),
    pytest.param("password = np.int64", id="name-with-digits"),
    pytest.param("password: pydantic.SecretStr", id="annotation-dotted"),
]


@pytest.mark.parametrize(("text", "secret"), DOTTED_PASSWORDS)
def test_a_dotted_password_in_an_entry_or_without_a_name_is_masked(text: str, secret: str) -> None:
    masked, findings = redact(text)

    assert secret not in masked
    assert findings


@pytest.mark.parametrize("text", DOTTED_CODE)
def test_code_of_the_same_shape_is_left_alone(text: str) -> None:
    assert redact(text) == (text, ())


def test_an_entry_of_a_one_line_mapping_ends_at_the_next_entry() -> None:
    flow = f"{{user:ada,password:{SECRET},port:5432}}"
    # Outside a mapping a comma and a colon may be in a password: the value is whole.
    alone = "password=Xk9,mQ2:zR7wLp"

    assert redact(flow)[0] == "{user:ada,password:[REDACTED:password],port:5432}"
    assert redact(alone)[0] == "password=[REDACTED:password]"


def test_a_name_with_digits_alone_after_a_spaced_equals_is_still_a_value() -> None:
    # An INI or properties file spaces its `=` as code does: a bare value there is the setting's.
    assert redact("password = summer2024_pass")[0] == "password = [REDACTED:password]"
    assert redact("private_key = pkcs1_key")[0] == "private_key = [REDACTED:private_key]"


_ARMOUR_ONLY = '_PKCS1_MARKER = ("-----BEGIN RSA PRIVATE KEY-----", "-----END RSA PRIVATE KEY-----")'
_BUILT_IN_CODE = (
    'invalid_key = b"-----BEGIN PRIVATE KEY-----\\n"\n'
    "invalid_key += base64.b64encode(_actually_invalid_private_key_pkcs8_der())\n"
    'invalid_key += b"\\n-----END PRIVATE KEY-----\\n"\n'
)
_BODY = ("MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7k2Lp9Rt4Yu6Io1", "Pa8Zx8Qw2Lp9Rt4Y==")


_TEMPLATE = "-----BEGIN PRIVATE KEY-----\n<your key here>\n-----END PRIVATE KEY-----\n"


@pytest.mark.parametrize(
    "text", [_ARMOUR_ONLY, _BUILT_IN_CODE, _TEMPLATE], ids=["markers", "built-in-code", "template"]
)
def test_armour_with_no_key_between_is_left_alone(text: str) -> None:
    assert redact(text) == (text, ())


def test_a_key_written_as_joined_literals_is_masked_piece_by_piece_and_the_code_kept() -> None:
    text = (
        "KEY = (\n"
        '    "-----BEGIN RSA PRIVATE KEY-----\\n"\n'
        f'    b"{_BODY[0]}\\n"\n'
        f'    "S\\n{_BODY[1]}\\n"\n'
        '    "-----END RSA PRIVATE KEY-----"\n'
        ")\n"
    )

    masked, findings = redact(text)

    assert masked == (
        "KEY = (\n"
        '    "-----BEGIN RSA PRIVATE KEY-----\\n"\n'
        '    b"[REDACTED:private_key]\\n"\n'
        '    "[REDACTED:private_key]\\n[REDACTED:private_key]\\n"\n'
        '    "-----END RSA PRIVATE KEY-----"\n'
        ")\n"
    )
    assert [finding.kind for finding in findings] == ["private_key"] * 3
    assert redact(masked) == (masked, ())


def test_a_key_between_armour_in_one_text_is_masked_whole() -> None:
    text = f"-----BEGIN EC PRIVATE KEY-----\n{_BODY[0]}\n{_BODY[1]}\n-----END EC PRIVATE KEY-----\n"

    assert redact(text)[0] == "[REDACTED:private_key]\n"


def test_a_published_example_under_a_secret_name_in_structured_content_is_left_alone() -> None:
    example = {"token": {"access_token": "2YotnFZFEjr1zCsicMWpAA", "token_type": "bearer"}}
    issued = {"token": {"access_token": "2YotnFZFEjr1zCsicMWpAB", "token_type": "bearer"}}

    assert redact_value(example) == (example, 0)
    masked = {"token": {"access_token": "[REDACTED:token]", "token_type": "bearer"}}
    assert redact_value(issued) == (masked, 1)


def test_a_query_value_is_masked_up_to_the_next_parameter_and_that_one_judged_alone() -> None:
    text = 'body = "oauth_token=lsdkfol23w54jlksdef&oauth_token_secret=qwe089234lkjsdf&confirmed=true"'

    assert redact(text)[0] == (
        'body = "oauth_token=[REDACTED:token]&oauth_token_secret=[REDACTED:secret]&confirmed=true"'
    )


@pytest.mark.parametrize("line", ["DB_PASSWORD=aa&cdefh=0", "password = aa&cdefh=0", "passwd=aa&cdefh=0"])
def test_an_ampersand_in_a_setting_is_the_values_own(line: str) -> None:
    # Only a field that is itself a query's parameter (after `?`, `&` or a quote) ends at `&name=`.
    assert redact(line)[0].endswith("[REDACTED:password]")


@pytest.mark.parametrize(
    "between",
    ['"', "'\n# a comment\n", '"\n)\nx = ("'],
    ids=["stray-quote", "comment", "code"],
)
def test_a_key_with_anything_but_joined_literals_between_its_armour_is_masked_whole(between: str) -> None:
    # A quote printed after the BEGIN line does not make bare body lines literals to mask by piece.
    body = [_BODY[0], _BODY[0][::-1], _BODY[1]]
    lines = "\n".join(body)
    text = f"-----BEGIN RSA PRIVATE KEY-----{between}\n{lines}\n-----END RSA PRIVATE KEY-----"

    masked = redact(text)[0]

    assert [line for line in body if line in masked] == []
    assert masked == "[REDACTED:private_key]"


def test_a_quoted_value_after_a_field_inside_a_string_is_still_a_value() -> None:
    # Only an operator after the closing quote says the string ended there (`"&key=" + name`).
    assert redact(f'body: "grant_type=password&password="{SECRET}"')[0] == (
        'body: "grant_type=password&password="[REDACTED:password]"'
    )


def test_a_password_holding_two_format_fields_is_still_masked() -> None:
    # Generated with `%` among its symbols: `%s` and `%d` in it make no template.
    assert redact('"password": "Xa%sQ7%d!kP2z9"')[0] == '"password": "[REDACTED:password]"'
