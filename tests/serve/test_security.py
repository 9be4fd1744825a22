"""The parts of serve's network security that need no running server: the token file (what a
header is judged, rotation, never saying a token), the TLS files' checks (each bad file named
by its option) and when the start-up warning is due."""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path

import pytest

from groundwatch._shared.errors import UsageError
from groundwatch.cli import build_parser
from groundwatch.serve import _tls
from groundwatch.serve._auth import INVALID_TOKEN, MISSING_TOKEN, TokenFile, TokenFileError
from groundwatch.serve.cli import exposure_warning, is_loopback, load_security

from ..tlscerts import Pki, make_pki

SECRET = "tok-Zx81-secret"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def token_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "tokens"
    path.write_text(text)
    return path


def test_a_header_is_accepted_missing_or_invalid(tmp_path: Path) -> None:
    tokens = TokenFile(str(token_file(tmp_path, f"  {SECRET}  \n\nsecond.token+/=\n")))
    assert len(tokens) == 2
    assert tokens.check(f"Bearer {SECRET}") is None
    assert tokens.check("bearer second.token+/=") is None  # the scheme is case-insensitive
    assert tokens.check(f"Bearer  {SECRET} ") is None
    for header in (None, "", "Bearer", "Bearer ", f"Basic {SECRET}", SECRET):
        assert tokens.check(header) == MISSING_TOKEN, header
    for header in (f"Bearer {SECRET}x", f"Bearer {SECRET[:-1]}", "Bearer second.token"):
        assert tokens.check(header) == INVALID_TOKEN, header
    assert SECRET not in repr(tokens)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("\n  \n", "holds no token"),
        (f"{SECRET}\nwith space {SECRET}\n", "line 2 is not a token"),
        (f"{SECRET}\u00e9\n", "line 1 is not a token"),
    ],
    ids=["empty", "inner space", "non-ascii"],
)
def test_a_bad_token_file_is_refused_without_saying_the_token(
    tmp_path: Path, text: str, said: str
) -> None:
    with pytest.raises(TokenFileError, match=said) as refused:
        TokenFile(str(token_file(tmp_path, text)))
    assert SECRET not in str(refused.value) and "--auth-token-file" in str(refused.value)


def test_reload_takes_the_new_tokens_and_keeps_the_old_on_a_bad_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = token_file(tmp_path, "old-Q1\n")
    tokens = TokenFile(str(path))
    path.write_text("old-Q1\nnew-W2\n")
    assert tokens.reload() and tokens.check("Bearer new-W2") is None
    path.unlink()
    assert not tokens.reload()
    assert tokens.check("Bearer new-W2") is None and tokens.check("Bearer old-Q1") is None
    assert "no such file" in caplog.text and "keeping the 2 tokens" in caplog.text
    assert "new-W2" not in caplog.text and "old-Q1" not in caplog.text


def _security(**options: str | None) -> tuple[object, object]:
    args = argparse.Namespace(tls_cert=None, tls_key=None, tls_client_ca=None, auth_token_file=None)
    for name, value in options.items():
        setattr(args, name, value)
    return load_security(args)


def test_tls_files_are_checked_and_each_problem_names_its_option(pki: Pki, tmp_path: Path) -> None:
    cert, key = str(pki.server_cert), str(pki.server_key)
    tls, auth = _security(tls_cert=cert, tls_key=key, tls_client_ca=str(pki.ca))
    assert isinstance(tls, _tls.TlsFiles) and tls.client_ca is not None and auth is None
    encrypted = tmp_path / "encrypted.key"
    subprocess.run(
        ["openssl", "pkey", "-in", key, "-aes256", "-passout", "pass:x", "-out", str(encrypted)],
        check=True,
        capture_output=True,
    )
    not_pem = tmp_path / "not.pem"
    not_pem.write_text("hello\n")
    cases = [
        ({"tls_cert": cert}, "--tls-cert needs --tls-key"),
        ({"tls_key": key}, "--tls-key needs --tls-cert"),
        ({"tls_client_ca": str(pki.ca)}, "--tls-client-ca needs --tls-cert and --tls-key"),
        ({"tls_cert": str(tmp_path / "nope.pem"), "tls_key": key}, "--tls-cert .*no such file"),
        ({"tls_cert": cert, "tls_key": str(tmp_path)}, "--tls-key .*cannot read it"),
        ({"tls_cert": str(not_pem), "tls_key": key}, "--tls-cert .*no PEM certificate"),
        ({"tls_cert": cert, "tls_key": str(pki.other_key)}, "--tls-key .* is not the key of"),
        ({"tls_cert": cert, "tls_key": str(encrypted)}, "--tls-key: the key is encrypted"),
        ({"tls_cert": cert, "tls_key": key, "tls_client_ca": str(not_pem)}, "--tls-client-ca"),
        ({"auth_token_file": str(tmp_path / "none")}, "--auth-token-file .*no such file"),
    ]
    for options, said in cases:
        with pytest.raises(UsageError, match=said):
            _security(**options)


def _args(host: str, insecure: bool = False) -> argparse.Namespace:
    return argparse.Namespace(host=host, insecure=insecure)


def test_the_warning_names_what_is_missing_on_a_non_loopback_address(
    pki: Pki, tmp_path: Path
) -> None:
    tls = _tls.load(str(pki.server_cert), str(pki.server_key), None)
    mutual = _tls.load(str(pki.server_cert), str(pki.server_key), str(pki.ca))
    tokens = TokenFile(str(token_file(tmp_path, "t\n")))
    assert exposure_warning(_args("127.0.0.1"), None, None) is None
    assert exposure_warning(_args("localhost"), None, None) is None
    both = exposure_warning(_args("0.0.0.0"), None, None)
    assert both is not None and "--tls-cert" in both and "--auth-token-file" in both
    no_token = exposure_warning(_args("0.0.0.0"), tls, None)
    assert no_token is not None and "--auth-token-file" in no_token and "--tls-cert" not in no_token
    no_tls = exposure_warning(_args("::"), None, tokens)
    assert no_tls is not None and "--tls-cert" in no_tls and "--auth-token-file" not in no_tls
    assert exposure_warning(_args("0.0.0.0"), tls, tokens) is None
    assert exposure_warning(_args("0.0.0.0"), mutual, None) is None  # client certificates
    assert exposure_warning(_args("0.0.0.0", insecure=True), None, None) is None


def test_loopback_addresses() -> None:
    for host in ("127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"):
        assert is_loopback(host), host
    for host in ("0.0.0.0", "::", "10.0.0.1", "no-such-host.invalid"):
        assert not is_loopback(host), host


def test_help_names_the_variables_and_never_a_token(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = token_file(tmp_path, f"{SECRET}\n")
    monkeypatch.setenv("GROUNDWATCH_SERVE_AUTH_TOKEN_FILE", str(path))
    monkeypatch.setenv("GROUNDWATCH_SERVE_TLS_CERT", "/etc/tls/tls.crt")
    parser = build_parser()
    assert parser.parse_args(["serve"]).auth_token_file == str(path)
    assert parser.parse_args(["serve"]).tls_cert == "/etc/tls/tls.crt"
    serve = parser._subparsers._group_actions[0].choices["serve"]  # type: ignore[union-attr]
    text = serve.format_help()
    for variable in (
        "GROUNDWATCH_SERVE_TLS_CERT",
        "GROUNDWATCH_SERVE_TLS_KEY",
        "GROUNDWATCH_SERVE_TLS_CLIENT_CA",
        "GROUNDWATCH_SERVE_AUTH_TOKEN_FILE",
    ):
        assert variable in text
    assert SECRET not in text
    # A Redis URL from the environment may hold a password: no --help prints it.
    monkeypatch.setenv("GROUNDWATCH_REDIS_URL", f"rediss://scorer:{SECRET}@redis:6380/0")
    parser = build_parser()
    for command in ("serve", "worker"):
        sub = parser._subparsers._group_actions[0].choices[command]  # type: ignore[union-attr]
        text = sub.format_help()
        assert "GROUNDWATCH_REDIS_URL" in text and SECRET not in text, command
