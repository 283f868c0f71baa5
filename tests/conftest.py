import compileall
import signal
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("compiler", "tuner", "workers", "db")


def pytest_sessionstart(session: pytest.Session) -> None:
    """Keep the bytecode of the checkout's packages before anything imports them. The
    suite starts hundreds of Python processes (workers, commands); where
    PYTHONDONTWRITEBYTECODE is set, none may write it, and each would compile the
    packages again. A module whose source changed is compiled afresh, as always."""
    for package in PACKAGES:
        compileall.compile_dir(ROOT / package, quiet=1)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20240611)


@pytest.fixture(scope="session", autouse=True)
def sigint_raises_keyboard_interrupt() -> Iterator[None]:
    """Ctrl-C reaches the tests and the processes they start, even in a test run
    started where SIGINT is ignored (in the background of a non-interactive shell):
    an ignored signal stays ignored across exec, so without this every Ctrl-C test
    would see its SIGINT vanish. A handled signal is reset to its default on exec,
    which lets each started Python install its own KeyboardInterrupt handler."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)
