"""Secrets at rest: master keys, wrapped data keys, AES-GCM with aad, rotation."""

from __future__ import annotations

import base64
import os
import stat
from pathlib import Path

import pytest

from tidemill.errors import ConfigurationError
from tidemill.workspace._crypto import (
    DataKey,
    Keyring,
    MasterKey,
    SecretKeyError,
    load_master_key,
)

PLAINTEXT = "sk-live-very-secret-value"
AAD = "default/f/x/token"
posix_only = pytest.mark.skipif(os.name == "nt", reason="POSIX file modes")


def _flip(text: str, index: int = -5) -> str:
    """`text` (a `...:base64` token) with one byte of its decoded body flipped."""
    head, _, body = text.rpartition(":")
    raw = bytearray(base64.urlsafe_b64decode(body))
    raw[index] ^= 0x01
    return f"{head}:{base64.urlsafe_b64encode(bytes(raw)).decode()}"


# --- MasterKey -------------------------------------------------------------------------


def test_master_key_encodes_and_parses_back() -> None:
    key = MasterKey.generate()
    text = key.encoded()
    assert MasterKey.parse(text) == key
    assert MasterKey.parse(text).key == key.key
    assert MasterKey.parse("  " + text.rstrip("=") + "\n") == key  # no padding, whitespace
    assert len(key.key_id) == 16 and int(key.key_id, 16) >= 0
    assert MasterKey.generate().key_id != key.key_id


def test_key_id_is_the_documented_fingerprint() -> None:
    import hashlib

    raw = bytes(range(32))
    expected = hashlib.sha256(b"tidemill-master-key" + raw).hexdigest()[:16]
    assert MasterKey(raw).key_id == expected


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "empty"),
        ("not base64 at all!", "not urlsafe base64"),
        (base64.urlsafe_b64encode(bytes(16)).decode(), "16 bytes"),
    ],
)
def test_malformed_key_text_says_what_is_wrong_and_how_to_make_one(text: str, says: str) -> None:
    with pytest.raises(SecretKeyError) as caught:
        MasterKey.parse(text)
    message = str(caught.value)
    assert says in message
    assert "tidemill ws keys new" in message and "python -c" in message
    assert isinstance(caught.value, ConfigurationError)


def test_master_key_must_be_32_bytes() -> None:
    with pytest.raises(SecretKeyError, match="32 bytes"):
        MasterKey(bytes(31))


def test_wrap_and_unwrap_round_trip() -> None:
    key = MasterKey.generate()
    data = os.urandom(32)
    wrapped = key.wrap(data, workspace="default")
    assert wrapped.startswith(key.key_id + ":")
    assert key.unwrap(wrapped, workspace="default") == data
    assert key.wrap(data, workspace="default") != wrapped  # a fresh nonce each time


def test_unwrap_with_the_wrong_master_key_names_both_ids() -> None:
    right, wrong = MasterKey.generate(), MasterKey.generate()
    wrapped = right.wrap(os.urandom(32), workspace="default")
    with pytest.raises(SecretKeyError) as caught:
        wrong.unwrap(wrapped, workspace="default")
    assert right.key_id in str(caught.value) and wrong.key_id in str(caught.value)


def test_unwrap_with_a_forged_key_id_still_fails() -> None:
    right, wrong = MasterKey.generate(), MasterKey.generate()
    wrapped = right.wrap(os.urandom(32), workspace="default")
    forged = wrong.key_id + wrapped[len(right.key_id) :]
    with pytest.raises(SecretKeyError):
        wrong.unwrap(forged, workspace="default")


def test_unwrap_fails_when_tampered_or_for_another_workspace() -> None:
    key = MasterKey.generate()
    wrapped = key.wrap(os.urandom(32), workspace="default")
    with pytest.raises(SecretKeyError, match="altered"):
        key.unwrap(_flip(wrapped), workspace="default")
    with pytest.raises(SecretKeyError, match="another workspace"):
        key.unwrap(wrapped, workspace="other")
    for garbage in ("", "nocolon", f"{key.key_id}:", f"{key.key_id}:!!!", f"{key.key_id}:AAAA"):
        with pytest.raises(SecretKeyError, match="not a wrapped data key"):
            key.unwrap(garbage, workspace="default")


# --- DataKey ---------------------------------------------------------------------------


def test_data_key_round_trip() -> None:
    key = DataKey.generate()
    token = key.encrypt(PLAINTEXT, aad=AAD)
    assert token.startswith("v1:") and PLAINTEXT not in token
    assert key.decrypt(token, aad=AAD) == PLAINTEXT
    assert key.encrypt(PLAINTEXT, aad=AAD) != token
    assert DataKey(key.raw).decrypt(token, aad=AAD) == PLAINTEXT
    for text in ("", "ünïcødé ✓ 秘密", "x" * 10_000):
        assert key.decrypt(key.encrypt(text, aad=AAD), aad=AAD) == text


def test_data_key_must_be_32_bytes() -> None:
    with pytest.raises(SecretKeyError):
        DataKey(bytes(16))


def _decrypt_error(key: DataKey, token: str, aad: str) -> SecretKeyError:
    with pytest.raises(SecretKeyError) as caught:
        key.decrypt(token, aad=aad)
    message = str(caught.value)
    assert PLAINTEXT not in message
    if len(token) > 8:  # a short token ("", "v1:") is in any message by chance
        assert token not in message and token[3:] not in message
    assert PLAINTEXT not in repr(caught.value.context)
    return caught.value


def test_tampered_ciphertext_fails_without_quoting_it() -> None:
    key = DataKey.generate()
    token = key.encrypt(PLAINTEXT, aad=AAD)
    for index in (0, 12, -1):  # the nonce, the ciphertext, the tag
        _decrypt_error(key, _flip(token, index), AAD)


def test_moving_the_ciphertext_to_another_item_fails() -> None:
    key = DataKey.generate()
    token = key.encrypt(PLAINTEXT, aad=AAD)
    error = _decrypt_error(key, token, "default/f/y/token")
    assert "default/f/y/token" in str(error)


def test_another_data_key_cannot_decrypt() -> None:
    token = DataKey.generate().encrypt(PLAINTEXT, aad=AAD)
    _decrypt_error(DataKey.generate(), token, AAD)


@pytest.mark.parametrize("token", ["", "v2:AAAA", "v1:", "v1:!!!!", "v1:AAAA", PLAINTEXT])
def test_malformed_tokens_fail_cleanly(token: str) -> None:
    _decrypt_error(DataKey.generate(), token, AAD)


# --- repr ------------------------------------------------------------------------------


def test_reprs_never_show_key_material() -> None:
    old, master = MasterKey.generate(), MasterKey.generate()
    data_key, _ = Keyring(master).new_data_key(workspace="default")
    keyring = Keyring(master, previous=[old])
    secrets_shown = []
    for key in (old.key, master.key, data_key.raw):
        secrets_shown += [
            repr(key),
            key.hex(),
            base64.urlsafe_b64encode(key).decode(),
            base64.urlsafe_b64encode(key).decode().rstrip("="),
            base64.b64encode(key).decode(),
        ]
    for obj in (old, master, data_key, keyring):
        for shown in (repr(obj), str(obj), f"{obj}", f"{obj!r}"):
            for secret in secrets_shown:
                assert secret not in shown, type(obj).__name__
    assert repr(master) == f"MasterKey(key_id={master.key_id!r})"
    assert master.key_id in repr(keyring) and old.key_id in repr(keyring)


# --- Keyring and rotation --------------------------------------------------------------


def test_keyring_round_trip() -> None:
    keyring = Keyring(MasterKey.generate())
    data_key, wrapped = keyring.new_data_key(workspace="default")
    token = data_key.encrypt(PLAINTEXT, aad=AAD)
    assert keyring.data_key(wrapped, workspace="default").decrypt(token, aad=AAD) == PLAINTEXT
    assert not keyring.needs_rewrap(wrapped)


def test_keyring_without_the_needed_key_names_it() -> None:
    old, new = MasterKey.generate(), MasterKey.generate()
    _, wrapped = Keyring(old).new_data_key(workspace="default")
    with pytest.raises(SecretKeyError) as caught:
        Keyring(new).data_key(wrapped, workspace="default")
    assert old.key_id in str(caught.value)
    assert caught.value.context["needed"] == old.key_id


def test_rotation_rewraps_with_the_new_master() -> None:
    old, new = MasterKey.generate(), MasterKey.generate()
    data_key, wrapped = Keyring(old).new_data_key(workspace="default")
    token = data_key.encrypt(PLAINTEXT, aad=AAD)

    rotating = Keyring(new, previous=[old])
    assert rotating.needs_rewrap(wrapped)
    assert rotating.data_key(wrapped, workspace="default").raw == data_key.raw
    rewrapped = rotating.rewrap(wrapped, workspace="default")

    assert rewrapped.startswith(new.key_id + ":")
    assert not rotating.needs_rewrap(rewrapped)
    assert not Keyring(new).needs_rewrap(rewrapped)
    after = Keyring(new).data_key(rewrapped, workspace="default")
    assert after.decrypt(token, aad=AAD) == PLAINTEXT
    with pytest.raises(SecretKeyError):
        Keyring(old).data_key(rewrapped, workspace="default")


def test_keyring_drops_duplicates_and_the_current_key_from_previous() -> None:
    old, new = MasterKey.generate(), MasterKey.generate()
    keyring = Keyring(new, previous=[old, new, MasterKey(old.key)])
    assert keyring.master is new
    assert [key.key_id for key in keyring.previous] == [old.key_id]


# --- load_master_key -------------------------------------------------------------------


@posix_only
def test_sqlite_key_file_is_created_private_and_reused(tmp_path: Path) -> None:
    db = tmp_path / ".tidemill" / "tidemill.db"
    first = load_master_key(environ={}, sqlite_path=db)
    key_file = tmp_path / ".tidemill" / "tidemill.db.key"
    assert key_file.is_file()
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert MasterKey.parse(key_file.read_text()) == first
    assert load_master_key(environ={}, sqlite_path=db) == first
    assert load_master_key(environ={}, sqlite_path=db, create=False) == first


def test_sqlite_key_file_is_not_created_when_told_not_to(tmp_path: Path) -> None:
    db = tmp_path / "tidemill.db"
    with pytest.raises(SecretKeyError, match="no master key"):
        load_master_key(environ={}, sqlite_path=db, create=False)
    assert not (tmp_path / "tidemill.db.key").exists()


@posix_only
def test_a_key_file_readable_by_others_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "tidemill.db"
    key_file = tmp_path / "tidemill.db.key"
    key_file.write_text(MasterKey.generate().encoded())
    key_file.chmod(0o644)
    with pytest.raises(SecretKeyError) as caught:
        load_master_key(environ={}, sqlite_path=db)
    assert "chmod 600" in str(caught.value)
    assert key_file.read_text()  # left alone


def test_the_env_var_beats_the_key_files(tmp_path: Path) -> None:
    db = tmp_path / "tidemill.db"
    on_disk = load_master_key(environ={}, sqlite_path=db)
    from_env, from_file = MasterKey.generate(), MasterKey.generate()
    named = tmp_path / "named.key"
    named.write_text(from_file.encoded() + "\n")
    both = {"TIDEMILL_MASTER_KEY": from_env.encoded(), "TIDEMILL_MASTER_KEY_FILE": str(named)}
    assert load_master_key(environ=both, sqlite_path=db) == from_env
    file_only = {"TIDEMILL_MASTER_KEY_FILE": str(named)}
    assert load_master_key(environ=file_only, sqlite_path=db) == from_file
    assert load_master_key(environ={}, sqlite_path=db) == on_disk


def test_env_var_key_needs_no_database_file(tmp_path: Path) -> None:
    key = MasterKey.generate()
    db = tmp_path / "tidemill.db"
    assert load_master_key(environ={"TIDEMILL_MASTER_KEY": key.encoded()}, sqlite_path=db) == key
    assert not (tmp_path / "tidemill.db.key").exists()


def test_a_malformed_env_key_names_the_variable() -> None:
    with pytest.raises(SecretKeyError) as caught:
        load_master_key(environ={"TIDEMILL_MASTER_KEY": "nope!"}, sqlite_path=None)
    message = str(caught.value)
    assert "TIDEMILL_MASTER_KEY" in message and "tidemill ws keys new" in message
    assert "nope!" not in message


def test_a_missing_key_file_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "absent.key"
    with pytest.raises(SecretKeyError) as caught:
        load_master_key(environ={"TIDEMILL_MASTER_KEY_FILE": str(missing)}, sqlite_path=None)
    assert str(missing) in str(caught.value) and "does not exist" in str(caught.value)


def test_postgres_without_env_is_an_error() -> None:
    with pytest.raises(SecretKeyError) as caught:
        load_master_key(environ={}, sqlite_path=None)
    message = str(caught.value)
    assert message.startswith("no master key: set TIDEMILL_MASTER_KEY")
    assert caught.value.hint and "tidemill ws keys new" in caught.value.hint


@posix_only
def test_a_key_file_made_meanwhile_by_another_process_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "tidemill.db"
    key_file = tmp_path / "tidemill.db.key"
    theirs = MasterKey.generate()
    real_open = os.open

    def racing_open(path: str | os.PathLike[str], flags: int, mode: int = 0o777) -> int:
        if Path(path) == key_file and flags & os.O_EXCL:
            fd = real_open(path, os.O_CREAT | os.O_WRONLY, 0o600)
            os.write(fd, theirs.encoded().encode())
            os.close(fd)
        return real_open(path, flags, mode)

    monkeypatch.setattr(os, "open", racing_open)
    assert load_master_key(environ={}, sqlite_path=db) == theirs
