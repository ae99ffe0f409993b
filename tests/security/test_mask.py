"""`mask` and `Secrets`, proven on generated passwords and URL shapes: a password of any characters, in a URL of any
scheme with or without a host, or as a driver's secret option, never survives; the rest of the URL does."""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from edinbox import ConfigurationError, StoreError
from edinbox._redact import Secrets, redact_data
from edinbox._urls import database_url, mask

# every character a password may hold on one line: the URL's delimiters, quotes, `%`, blanks, non-ASCII
_NASTY = "@/:?#%&;= '\"\\[]<>()é€😀\t"
PASSWORDS = st.text(
    alphabet=st.one_of(st.sampled_from(_NASTY), st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp"))),
    min_size=1,
    max_size=24,
).filter(lambda p: "://" not in p)
SCHEMES = st.one_of(
    st.sampled_from(["postgresql", "postgres", "mysql", "redis", "amqp", "amqps", "nats", "kafka", "http", "https"]),
    st.from_regex(r"[a-z][a-z0-9+.-]{0,8}", fullmatch=True),
)
USERS = st.text(alphabet=st.characters(blacklist_characters=":/@", blacklist_categories=("Cs", "Cc", "Z")), max_size=8)
HOSTS = st.sampled_from(
    ["", "db", "127.0.0.1", "[::1]", "[fe80::1%25eth0]", "hôst.exämple", "my_host~x", "xn--bcher-kva.ch", "h-1.b"]
)
PORTS = st.sampled_from(["", ":5432", ":1", ":"])
RESTS = st.sampled_from(["", "/", "/db", "/0", "/db?host=/run/postgresql", "/?queue=q", "?topic=t", "/x#frag"])


@settings(deadline=None)  # a loaded machine: a regex over a long generated text may take longer than 200 ms
@given(scheme=SCHEMES, user=USERS, password=PASSWORDS, host=HOSTS, port=PORTS, rest=RESTS, encoded=st.booleans())
def test_mask_hides_the_password_of_any_url(
    *, scheme: str, user: str, password: str, host: str, port: str, rest: str, encoded: bool
) -> None:
    """The password, raw or percent-encoded, is replaced by `***` and everything else of the URL is kept, with or
    without a host, alone or inside a sentence with another URL after it."""
    written = quote(password, safe="") if encoded else password
    assume(not rest.startswith("?") or host)  # `u:p@?x` is not a URL anyone writes
    head, tail = f"{scheme}://{user}:", f"@{host}{port}{rest}"
    assert mask(head + written + tail) == head + "***" + tail
    sentence = f"cannot connect to {head}{written}{tail} (refused), see amqp://a:b@other/x"
    assert mask(sentence) == f"cannot connect to {head}***{tail} (refused), see amqp://a:***@other/x"


_OPTIONS = st.sampled_from(
    [
        "sasl.password",
        "ssl.key.password",
        "ssl.keystore.password",
        "sasl.oauthbearer.client.secret",
        "password",
        "access_token",
        "api_key",
        "client_secret",
        "ssl.key.pem",
        "x.secret.y",
    ]
)
VALUES = st.text(alphabet=st.characters(blacklist_characters="&;#\n", blacklist_categories=("Cs", "Z", "Cc")))


@settings(deadline=None)  # a loaded machine: a regex over a long generated text may take longer than 200 ms
@given(_OPTIONS, st.booleans(), VALUES, st.sampled_from(["kafka://127.0.0.1:9092", "amqp://h/", "redis:///0"]))
def test_mask_hides_secret_options(name: str, upper: bool, value: str, base: str) -> None:
    """A driver's secret option given as a URL query option (any case) is masked up to the next option; the other
    options are kept (unless an `@` in the value makes the host's port look like a password: then more is masked)."""
    option = name.upper() if upper else name
    url = f"{base}?topic=t&{option}={value}&group=g"
    if "@" in value:
        assert f"={value}&" not in mask(url)
    else:
        assert mask(url) == f"{base}?topic=t&{option}=***&group=g"
    items = f"settings {{'{option}': '{value}', 'topic': 't'}}"
    assume("'" not in value and "\\" not in value)
    assert mask(items) == f"settings {{'{option}': ***, 'topic': 't'}}"


@settings(deadline=None)  # a loaded machine: a regex over a long generated text may take longer than 200 ms
@given(PASSWORDS | st.text(min_size=1), st.sampled_from(["postgresql://u:{}@/db", "kafka://h?sasl.password={}&x=1"]))
def test_secrets_replace_every_spelling_anywhere(password: str, template: str) -> None:
    """The exact password of a configured URL is replaced wherever a text quotes it (a driver's error), as written,
    decoded, percent-encoded, JSON- or repr-escaped, even where no URL shape is left to find it (a `://` or a line
    break in it)."""
    assume(password.strip("*"))  # a password of stars would be found in the `***` that replaced it
    url = template.format(quote(password, safe=""))
    known = Secrets([url])
    quoted = [password, quote(password, safe=""), json.dumps(password)[1:-1], repr(password)[1:-1]]
    for spelling in quoted:
        text = known.text(f'unexpected spaces found in "{spelling}", use percent-encoded spaces (%20) instead')
        assert spelling not in text or spelling in "unexpected spaces found in , use percent-encoded (%20) instead"
        assert "***" in text


@settings(deadline=None)  # a loaded machine: a regex over a long generated text may take longer than 200 ms
@given(PASSWORDS)
def test_a_json_document_stays_json(password: str) -> None:
    """Redacting a document text by text keeps it valid JSON with every other value as it was, however the
    password's characters would have let a pattern run over the rendered document."""
    url = f"redis://:{password}@/0"
    document = {"db": url, "error": f"connect to {url} failed", "n": [1, "user@example.org"]}
    clean = redact_data(document)
    assert clean == {
        "db": "redis://:***@/0",
        "error": "connect to redis://:***@/0 failed",
        "n": [1, "user@example.org"],
    }
    assert json.loads(json.dumps(clean)) == clean


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://user:PW@/db?host=/run/postgresql",
        "redis://:PW@/0",
        "amqp://u:PW@/",
        "http://u:PW@/x",
        "kafka://127.0.0.1:9092?topic=t&sasl.password=PW",
        "kafka://127.0.0.1:9092?topic=t&ssl.key.password=PW",
        "kafka://127.0.0.1:9092?topic=t&sasl.oauthbearer.client.secret=PW",
    ],
)
def test_the_reviews_urls_are_masked(url: str) -> None:
    """Each URL the security review found printed in clear (finding 1) is masked, and an error naming it too."""
    assert "PW" not in mask(url)
    assert "PW" not in str(StoreError(f"cannot connect to {url}"))
    assert "PW" not in str(ConfigurationError("bad URL", url))


def test_libpq_gets_the_password_percent_encoded() -> None:
    """A PostgreSQL password holding a space, `@`, `/` or a stray `%` reaches libpq encoded, so psycopg neither
    quotes it back nor takes its tail for the host; escapes already written are kept."""
    target = database_url("postgresql://u:p@s/ w%zz%20x@/db?host=/run/postgresql").target
    assert target == "postgresql://u:p%40s%2F%20w%25zz%20x@/db?host=/run/postgresql"
    assert database_url("postgresql://u:plain@db:5432/hub").target == "postgresql://u:plain@db:5432/hub"


@pytest.mark.parametrize("password", ["p@ss/x%zz", "p%zzw", "a@b/c?d#e"])
def test_psycopg_quotes_no_password_back(password: str) -> None:
    """A PostgreSQL password written raw with `@`, `/` or a stray `%` reaches libpq encoded: the connection's error
    (nothing listens on port 1) names the URL masked and quotes no part of the password (libpq took the tail after
    its first `@` for the host, and quoted a bad escape with everything after it)."""
    pytest.importorskip("psycopg")
    from edinbox import Inbox

    with pytest.raises(StoreError) as caught:
        Inbox(f"postgresql://postgres:{password}@127.0.0.1:1/test", consumer="c").verify()
    text = str(caught.value)
    assert "postgres:***@127.0.0.1:1/test" in text
    for part in (password, *password.split("@")[1:], "%zz", "zzw"):
        assert part not in text, text
