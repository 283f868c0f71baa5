"""Secrets a deployment hands in as files: the database password of
``$TENSORTUNE_DB_PASSWORD_FILE`` and the admin token of ``db upgrade
--admin-token-file``. The test PostgreSQL server trusts every local user, so the
password is checked on the URL the command line makes, not by logging in."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest
from pg_server import BACKENDS, fresh_url
from sqlalchemy.engine import make_url

from db import Role, SQLDatabase
from tuner.cli.errors import UsageError
from tuner.cli.main import main
from tuner.cli.secret_files import with_password_file

SERVER_URL = "postgresql+psycopg://tensortune@db:5432/tuning"
# Characters a URL must escape, and the newline `echo` leaves at the end of a file.
PASSWORD = "p@ss:w/rd%?#"


@pytest.fixture
def password_file(tmp_path: Path) -> str:
    path = tmp_path / "db_password"
    path.write_text(PASSWORD + "\n")
    return str(path)


def test_a_server_url_gets_the_files_password(password_file):
    url = with_password_file(SERVER_URL, password_file, "$VARIABLE")
    parsed = make_url(url)
    assert parsed.password == PASSWORD
    assert parsed.render_as_string() == "postgresql+psycopg://tensortune:***@db:5432/tuning"


def test_a_password_in_the_url_is_kept_and_the_file_not_read(tmp_path):
    url = "postgresql+psycopg://tensortune:given@db/tuning"
    assert with_password_file(url, str(tmp_path / "missing"), "$VARIABLE") == url


@pytest.mark.parametrize("url", ["sqlite:///tuning.db", "not a url"])
def test_a_url_without_a_server_is_left_alone(url, password_file):
    assert with_password_file(url, password_file, "$VARIABLE") == url


def test_without_a_file_the_url_is_unchanged():
    assert with_password_file(SERVER_URL, None, "$VARIABLE") == SERVER_URL


@pytest.mark.parametrize(("content", "reason"), [(None, "cannot read it"), ("\n", "is empty")])
def test_a_missing_or_empty_file_is_refused_naming_where_it_came_from(tmp_path, content, reason):
    path = tmp_path / "db_password"
    if content is not None:
        path.write_text(content)
    with pytest.raises(UsageError, match=f"\\$VARIABLE '{path}': .*{reason}"):
        with_password_file(SERVER_URL, str(path), "$VARIABLE")


def test_the_command_line_connects_with_the_password(password_file, monkeypatch, capsys):
    """Nothing listens on port 1: the error names the URL it tried, password hidden."""
    monkeypatch.setenv("TENSORTUNE_DB_PASSWORD_FILE", password_file)
    url = "postgresql+psycopg://tensortune@127.0.0.1:1/tuning"
    assert main(["db", "current", "--url", url]) == 1
    err = capsys.readouterr().err
    assert "postgresql+psycopg://tensortune:***@127.0.0.1:1/tuning" in err
    assert PASSWORD not in err


def test_the_command_line_refuses_a_missing_password_file(tmp_path, monkeypatch, capsys):
    missing = tmp_path / "db_password"
    monkeypatch.setenv("TENSORTUNE_DB_PASSWORD_FILE", str(missing))
    assert main(["db", "current", "--url", "postgresql+psycopg://tensortune@db/tuning"]) == 2
    err = capsys.readouterr().err
    assert f"$TENSORTUNE_DB_PASSWORD_FILE '{missing}': cannot read it" in err


# db upgrade --admin-token-file ------------------------------------------------------


@pytest.fixture(params=BACKENDS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return fresh_url(request.param, tmp_path)


def token_file(folder: Path, secret: str) -> str:
    path = folder / "admin_token"
    path.write_text(secret + "\n")
    return str(path)


def test_upgrade_registers_the_admin_token_once(url, tmp_path, capsys):
    secret = "tt_" + secrets.token_urlsafe(32)
    upgrade = ["db", "upgrade", "--url", url, "--admin-token-file", token_file(tmp_path, secret)]
    assert main(upgrade) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "admin token admin: registered"
    assert main(upgrade) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "admin token admin: already there"
    with SQLDatabase(url) as database:
        token = database.token_for_secret(secret)
        assert token is not None and token.role is Role.ADMIN
        assert database.tokens() == [token]


def test_upgrade_refuses_a_short_secret_before_it_migrates(tmp_path, capsys):
    path = tmp_path / "tuning.db"
    file = token_file(tmp_path, "tt_short")
    assert main(["db", "upgrade", "--url", f"sqlite:///{path}", "--admin-token-file", file]) == 2
    err = capsys.readouterr().err
    assert f"--admin-token-file '{file}': a token secret needs 32 characters or more" in err
    assert "python3 -c 'import secrets; print(\"tt_\" + secrets.token_urlsafe(32))'" in err
    assert not path.exists()
