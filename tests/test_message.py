"""The shared values: Message keys and fingerprints, URL masking."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from edinbox import Message
from edinbox._urls import _PASSWORD, _QUERY_PASSWORD, _QUOTED_PASSWORD, mask


def test_fingerprint_defaults_to_sha256_of_payload() -> None:
    """A message without an explicit fingerprint is compared by the SHA-256 of its payload."""
    assert Message("1", "s", b"abc").fingerprint == hashlib.sha256(b"abc").hexdigest()


def test_explicit_fingerprint_is_kept() -> None:
    """A fingerprint given by the caller (e.g. from normalised EDI segments) wins over the payload hash."""
    assert Message("1", "s", b"abc", fingerprint="f").fingerprint == "f"


def test_empty_message_id_is_refused() -> None:
    """An empty message id cannot key anything and is refused with a clear error."""
    with pytest.raises(ValueError, match="message_id"):
        Message("", "s")


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("postgresql://app:s3cret@db/hub", "postgresql://app:***@db/hub"),
        ("amqp://guest:guest@127.0.0.1/?queue=q", "amqp://guest:***@127.0.0.1/?queue=q"),
        ("host=db password=s3cret user=app", "host=db password=*** user=app"),
        ("sqlite:///var/lib/hub.db", "sqlite:///var/lib/hub.db"),
        *(
            (f"host=db {word}=s3cret user=app", f"host=db {word}=*** user=app")
            for word in ("passwd", "PWD", "Secret", "token", "access_token", "API_KEY", "apikey")
        ),
        ("dsn?user=app&Password=s3cret", "dsn?user=app&Password=***"),
        # letters the pattern's IGNORECASE matches beyond ASCII case: long s, dotless and dotted capital i
        ("host=db pa\u017f\u017fword=s3cret", "host=db pa\u017f\u017fword=***"),
        ("host=db ap\u0131_key=s3cret", "host=db ap\u0131_key=***"),
        ("host=db AP\u0130KEY=s3cret", "host=db AP\u0130KEY=***"),
        ("settled key=X12:ZZ:ACME>ZZ:HUB/1 outcome=processed", "settled key=X12:ZZ:ACME>ZZ:HUB/1 outcome=processed"),
    ],
)
def test_mask_hides_passwords(url: str, expected: str) -> None:
    """Passwords in URLs and key=value DSNs are masked, whatever the parameter's name and case; text without one is
    unchanged."""
    assert mask(url) == expected


_PIECES = st.sampled_from(
    [
        *(" password=", "&PA\u017f\u017fWORD=", "?ap\u0131_key=", ";Secret=", " token=", " pwd=", "pg://u:p@h/"),
        *("&sasl.oauthbearer.client.secret=", "?ssl.KEY.pem=", "'sasl.password': ", '"Token"=', "://", "@", "'", '"'),
    ]
)


@given(st.lists(st.one_of(_PIECES, st.text(max_size=4)), max_size=10).map("".join))
def test_mask_skips_only_what_could_not_match(text: str) -> None:
    """The substring checks before each pattern change nothing: mask gives what running both patterns always
    gives, on text built from password parameters, URLs, separators and arbitrary characters."""
    every = _QUERY_PASSWORD.sub(r"\g<head>***", _PASSWORD.sub(r"\g<head>***\g<tail>", text))
    assert mask(text) == _QUOTED_PASSWORD.sub(r"\g<head>***", every)
