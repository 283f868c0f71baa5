"""Secrets a deployment hands tensortune as files (Docker secrets, ``/run/secrets/...``)
rather than in its environment or on its command line, where ``ps`` and ``docker
inspect`` would show them: the database password and the first admin token's secret."""

from __future__ import annotations

from sqlalchemy import exc
from sqlalchemy.engine import make_url

from tuner.cli.errors import UsageError


def read_secret_file(path: str, named: str) -> str:
    """The file's content without its trailing newline (``echo`` and editors add one);
    ``named`` says where the path came from (a flag or a variable), for the message."""
    try:
        with open(path, encoding="utf-8") as file:
            secret = file.read().rstrip("\r\n")
    except (OSError, UnicodeDecodeError) as err:
        reason = err.strerror if isinstance(err, OSError) else "it is not UTF-8 text"
        raise UsageError(f"{named} {path!r}: cannot read it ({reason}); check the path") from None
    if not secret:
        raise UsageError(f"{named} {path!r}: the file is empty; write the secret into it")
    return secret


def with_password_file(url: str, password_file: str | None, named: str) -> str:
    """``url`` with the content of ``password_file`` as its password, unless it has one
    or names a SQLite file (which has none). A URL that does not parse is left as it is,
    for opening it to refuse with the forms a URL may take."""
    if password_file is None:
        return url
    try:
        parsed = make_url(url)
    except exc.ArgumentError:
        return url
    if parsed.get_backend_name() == "sqlite" or parsed.password is not None:
        return url
    password = read_secret_file(password_file, named)
    return parsed.set(password=password).render_as_string(hide_password=False)
