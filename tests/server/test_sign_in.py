"""Signing in with a password, tokens with scopes, CSRF, revocation, rate limits, headers."""

from __future__ import annotations

import httpx
from tests.server.conftest import PASSWORD, Live


def test_health_is_public_and_says_little(live: Live) -> None:
    with live.anonymous() as client:
        answer = client.get("/health")
    assert answer.status_code == 200
    assert answer.json()["status"] == "ok"
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert answer.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in answer.headers["content-security-policy"]


def test_an_anonymous_caller_is_asked_to_sign_in(live: Live) -> None:
    with live.anonymous() as client:
        answer = client.get("/api/auth/me")
    assert answer.status_code == 401
    body = answer.json()
    assert body["type"] == "SignInFailed" and body["hint"]
    assert answer.headers["www-authenticate"].startswith("Bearer")


def test_a_token_signs_its_user_in(live: Live) -> None:
    with live.client("olga") as client:
        me = client.get("/api/auth/me").json()
    assert (me["user"], me["is_admin"], me["via"]) == ("olga", False, "token")


def test_a_bad_token_is_refused_with_a_typed_error(live: Live) -> None:
    for bad in ("nonsense", "tm_pat_abc_def", live.tokens["ada"] + "x", "Basic abc"):
        header = bad if bad.startswith("Basic") else f"Bearer {bad}"
        with httpx.Client(base_url=live.url, headers={"Authorization": header}) as client:
            answer = client.get("/api/auth/me")
        assert answer.status_code == 401, bad
        assert answer.json()["type"] == "SignInFailed"


def test_password_sign_in_sets_an_httponly_cookie_and_needs_csrf_to_change_things(
    live: Live,
) -> None:
    live.ws.set_password("olga", PASSWORD)
    with live.anonymous() as client:
        signed = client.post("/api/auth/sign-in", json={"user": "olga", "password": PASSWORD})
        assert signed.status_code == 200, signed.text
        cookie = signed.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie
        csrf = signed.json()["csrf"]
        assert client.get("/api/auth/me").json()["via"] == "session"
        # A change without the CSRF token is refused, and changes nothing.
        refused = client.post("/api/auth/tokens", json={"name": "x"})
        assert refused.status_code == 403 and "CSRF" in refused.json()["message"]
        assert client.get("/api/auth/tokens").json() == [
            t for t in client.get("/api/auth/tokens").json() if t["name"] != "x"
        ]
        made = client.post("/api/auth/tokens", json={"name": "x"}, headers={"X-CSRF-Token": csrf})
        assert made.status_code == 201, made.text
        out = client.post("/api/auth/sign-out", headers={"X-CSRF-Token": csrf})
        assert out.status_code == 204
        client.cookies.clear()
        assert client.get("/api/auth/me").status_code == 401


def test_a_wrong_password_and_an_unknown_user_read_alike(live: Live) -> None:
    live.ws.set_password("vic", PASSWORD)
    with live.anonymous() as client:
        wrong = client.post("/api/auth/sign-in", json={"user": "vic", "password": "nope nope nope"})
        nobody = client.post("/api/auth/sign-in", json={"user": "zed", "password": PASSWORD})
    assert wrong.status_code == nobody.status_code == 401
    assert wrong.json() == nobody.json()


def test_failed_sign_ins_are_throttled(live: Live) -> None:
    live.ws.set_password("max", PASSWORD)
    with live.anonymous() as client:
        for _ in range(5):
            client.post("/api/auth/sign-in", json={"user": "max", "password": "wrong password"})
        throttled = client.post("/api/auth/sign-in", json={"user": "max", "password": PASSWORD})
    assert throttled.status_code == 429
    assert throttled.json()["type"] == "SignInThrottled"
    assert int(throttled.headers["retry-after"]) > 0


def test_a_token_is_shown_once_listed_by_prefix_and_revoked_at_once(live: Live) -> None:
    with live.client("vic") as client:
        made = client.post("/api/auth/tokens", json={"name": "ci", "scopes": ["runs:read"]})
        assert made.status_code == 201
        text, info = made.json()["token"], made.json()["info"]
        assert text.startswith(info["prefix"]) and info["scopes"] == ["runs:read"]
        listed = client.get("/api/auth/tokens").json()
        assert all("token" not in t for t in listed)
        assert info["id"] in [t["id"] for t in listed]
        with httpx.Client(base_url=live.url, headers={"Authorization": f"Bearer {text}"}) as ci:
            assert ci.get("/api/auth/me").json()["scopes"] == ["runs:read"]
            # Its scopes do not include people: it may not list tokens.
            assert ci.get("/api/auth/tokens").status_code == 403
            assert client.delete(f"/api/auth/tokens/{info['id']}").status_code == 200
            again = ci.get("/api/auth/me")
        assert again.status_code == 401 and "revoked" in again.json()["message"]


def test_token_requests_with_bad_input_are_4xx(live: Live) -> None:
    with live.client("ada") as client:
        for body in (
            {"name": ""},
            {"name": "x", "scopes": ["runs:delete"]},
            {"name": "x", "scopes": []},
            {"name": "x", "expires_in_days": -1},
            [1, 2],
        ):
            answer = client.post("/api/auth/tokens", json=body)
            assert 400 <= answer.status_code < 500, (body, answer.text)
            assert answer.json()["type"] in ("InvalidRequest", "InvalidValue")
        assert client.delete("/api/auth/tokens/nope").status_code == 404
