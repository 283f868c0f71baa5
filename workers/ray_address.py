"""The address of a Ray cluster to join, checked before Ray sees it.

Ray takes any text as an address and, for one where no cluster answers, retries
"Failed to connect to GCS" for minutes. So the form is checked first (``host:port``,
``ray://host:port`` or ``auto``), and the port is reached with a plain TCP connect
bounded by a timeout, which fails at once where nothing listens and after the
timeout where the host does not answer. Nothing here imports Ray.
"""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass

from workers.base import WorkersError

AUTO = "auto"
_ADDRESS = re.compile(
    r"^(?:ray://)?(?P<host>[A-Za-z0-9](?:[A-Za-z0-9.\-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\])"
    r":(?P<port>[0-9]{1,5})$"
)
FORMS = "host:port (as `ray start --head` prints it), ray://host:port or auto"


@dataclass(frozen=True)
class RayAddress:
    host: str
    port: int


def parse_address(address: str) -> RayAddress | None:
    """The host and port ``address`` names; None for ``auto`` (the cluster Ray finds
    itself). Raises WorkersError naming the address and the forms accepted."""
    if address == AUTO:
        return None
    match = _ADDRESS.match(address)
    port = int(match["port"]) if match else 0
    if match is None or not 1 <= port <= 65535:
        raise WorkersError(f"{address!r} is not a Ray cluster address; give {FORMS}")
    return RayAddress(match["host"].strip("[]"), port)


def check_reachable(address: str, timeout_s: float) -> None:
    """Raise WorkersError unless something listens at ``address`` within ``timeout_s``."""
    if not timeout_s > 0:
        raise WorkersError(f"the Ray connect timeout must be positive, got {timeout_s}")
    parsed = parse_address(address)
    if parsed is None:
        return
    try:
        socket.create_connection((parsed.host, parsed.port), timeout=timeout_s).close()
    except OSError as err:
        why = err.strerror or type(err).__name__
        raise WorkersError(
            f"no Ray cluster answers at {address!r} within {timeout_s:g} s ({why}); "
            f"start one there (ray start --head --port={parsed.port}) or give the address "
            "its head node printed"
        ) from None
