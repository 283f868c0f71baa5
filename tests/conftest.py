import signal
from collections.abc import Iterator

import numpy as np
import pytest


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
