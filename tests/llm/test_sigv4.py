"""SigV4 signing against AWS's published examples, and against botocore for Bedrock requests."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

import pytest

from tidemill.llm.http._sigv4 import AwsKeys, canonical_request, sign_v4, signing_key

# -- AWS's published examples -------------------------------------------------------------------
#
# The values below are copied from AWS's documentation, not computed here:
# - "Examples of how to derive a signing key for Signature Version 4" (AWS General
#   Reference): secret `wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY`, 20120215, us-east-1, iam;
# - "Signature Version 4 signing process", tasks 1-4 (AWS General Reference): the IAM
#   `ListUsers` GET with its canonical-request hash and signature;
# - the "Signature Version 4 test suite" (aws-sig-v4-test-suite): `get-vanilla`,
#   `post-vanilla`, `get-vanilla-query-order-key-case` and `post-x-www-form-urlencoded`,
#   signed for service `service` in us-east-1 at 20150830T123600Z.

EXAMPLE_KEYS = AwsKeys("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
EXAMPLE_TIME = datetime(2015, 8, 30, 12, 36, 0, tzinfo=UTC)


def test_the_documented_signing_key_derivation() -> None:
    key = signing_key(EXAMPLE_KEYS.secret_access_key, "20120215", "us-east-1", "iam")
    assert key.hex() == "f4780e2d9f65fa895f9c67b32ce1baf0b0d8a43505a000a1a9e090d414db404d"


def test_the_documented_iam_list_users_example() -> None:
    url = "https://iam.amazonaws.com/?Action=ListUsers&Version=2010-05-08"
    content_type = "application/x-www-form-urlencoded; charset=utf-8"
    request, signed = canonical_request(
        "GET",
        url,
        {
            "Content-Type": content_type,
            "Host": "iam.amazonaws.com",
            "X-Amz-Date": "20150830T123600Z",
        },
        b"",
    )
    assert signed == "content-type;host;x-amz-date"
    assert (
        hashlib.sha256(request.encode()).hexdigest()
        == "f536975d06c0309214f805bb90ccff089219ecd68b2577efef23edd43b7e1a59"
    )
    headers = sign_v4(
        "GET",
        url,
        body=b"",
        keys=EXAMPLE_KEYS,
        region="us-east-1",
        service="iam",
        headers={"content-type": content_type},
        now=EXAMPLE_TIME,
    )
    assert headers == {
        "x-amz-date": "20150830T123600Z",
        "authorization": "AWS4-HMAC-SHA256 "
        "Credential=AKIDEXAMPLE/20150830/us-east-1/iam/aws4_request, "
        "SignedHeaders=content-type;host;x-amz-date, "
        "Signature=5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7",
    }


SUITE = [
    (
        "get-vanilla",
        "GET",
        "https://example.amazonaws.com/",
        {},
        b"",
        "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
    ),
    (
        "post-vanilla",
        "POST",
        "https://example.amazonaws.com/",
        {},
        b"",
        "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b",
    ),
    (
        "get-vanilla-query-order-key-case",
        "GET",
        "https://example.amazonaws.com/?Param2=value2&Param1=value1",
        {},
        b"",
        "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500",
    ),
    (
        "post-x-www-form-urlencoded",
        "POST",
        "https://example.amazonaws.com/",
        {"Content-Type": "application/x-www-form-urlencoded"},
        b"Param1=value1",
        "ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a",
    ),
]


@pytest.mark.parametrize(
    ("name", "method", "url", "headers", "body", "signature"), SUITE, ids=[row[0] for row in SUITE]
)
def test_the_published_test_suite(
    name: str, method: str, url: str, headers: dict[str, str], body: bytes, signature: str
) -> None:
    signed = sign_v4(
        method,
        url,
        body=body,
        keys=EXAMPLE_KEYS,
        region="us-east-1",
        service="service",
        headers=headers,
        now=EXAMPLE_TIME,
    )
    assert signed["authorization"].endswith(f", Signature={signature}")
    assert (
        "Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request"
        in (signed["authorization"])
    )


# -- what Bedrock needs ---------------------------------------------------------------------------

BEDROCK_URL = (
    "https://bedrock-runtime.us-east-1.amazonaws.com/model/"
    "us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse-stream"
)
BODY = b'{"messages":[{"role":"user","content":[{"text":"Hello"}]}]}'
KEYS = AwsKeys("AKIAEXAMPLE1234", "secret/key+example", "session-token-EXAMPLE")


def test_the_path_is_encoded_a_second_time_for_the_signature() -> None:
    request, signed = canonical_request(
        "POST", BEDROCK_URL, {"host": "bedrock-runtime.us-east-1.amazonaws.com"}, BODY
    )
    assert request.splitlines()[1] == (
        "/model/us.anthropic.claude-sonnet-4-5-20250929-v1%253A0/converse-stream"
    )
    assert signed == "host"
    assert request.endswith(hashlib.sha256(BODY).hexdigest())
    once, _ = canonical_request("POST", BEDROCK_URL, {}, BODY, double_encode=False)
    assert "v1%3A0" in once.splitlines()[1]


def test_header_names_are_lowercased_sorted_and_values_trimmed() -> None:
    request, signed = canonical_request(
        "post", "https://h.example/", {"X-B": "  two   spaces ", "a": "1", "x-b": "again"}, b""
    )
    lines = request.splitlines()
    assert lines[0] == "POST"
    assert lines[3:6] == ["a:1", "x-b:two spaces,again", ""]
    assert signed == "a;x-b"


def test_the_session_token_is_sent_and_signed() -> None:
    headers = sign_v4(
        "POST", BEDROCK_URL, body=BODY, keys=KEYS, region="us-east-1", service="bedrock"
    )
    assert headers["x-amz-security-token"] == "session-token-EXAMPLE"
    assert "SignedHeaders=host;x-amz-date;x-amz-security-token," in headers["authorization"]
    assert "secret/key+example" not in repr(KEYS) and "session-token" not in repr(KEYS)


def test_a_port_is_part_of_the_signed_host() -> None:
    url = "http://127.0.0.1:8443/model/m/converse"
    plain = sign_v4(
        "POST", url, body=b"{}", keys=KEYS, region="r", service="bedrock", now=EXAMPLE_TIME
    )
    explicit = sign_v4(
        "POST",
        url,
        body=b"{}",
        keys=KEYS,
        region="r",
        service="bedrock",
        headers={"Host": "127.0.0.1:8443"},
        now=EXAMPLE_TIME,
    )
    assert plain == explicit


@pytest.mark.parametrize("token", [None, "session-token-EXAMPLE"])
def test_bedrock_signatures_match_botocore(
    monkeypatch: pytest.MonkeyPatch, token: str | None
) -> None:
    auth_module: Any = pytest.importorskip("botocore.auth")
    credentials_module: Any = pytest.importorskip("botocore.credentials")
    awsrequest: Any = pytest.importorskip("botocore.awsrequest")
    now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    monkeypatch.setattr(auth_module, "get_current_datetime", lambda *_, **__: now)
    request = awsrequest.AWSRequest(method="POST", url=BEDROCK_URL, data=BODY)
    botocore_credentials = credentials_module.Credentials(
        KEYS.access_key_id, KEYS.secret_access_key, token
    )
    auth_module.SigV4Auth(botocore_credentials, "bedrock", "us-east-1").add_auth(request)
    keys = AwsKeys(KEYS.access_key_id, KEYS.secret_access_key, token)
    ours = sign_v4(
        "POST", BEDROCK_URL, body=BODY, keys=keys, region="us-east-1", service="bedrock", now=now
    )
    assert ours["authorization"] == request.headers["Authorization"]
    assert ours["x-amz-date"] == request.headers["X-Amz-Date"]
    assert ours.get("x-amz-security-token") == request.headers.get("X-Amz-Security-Token")
