"""The values of the two settings that are addresses, parsed: the store's URL
(`ENVLOOP_DATABASE_URL`) and the DNS resolvers (`ENVLOOP_DNS_UPSTREAM`).

The settings model refuses a bad value with the very function the store's engine and the DNS
observer later parse it with, so what `el` accepts at start is what works when it is used. Each is
a rule about one kind of value rather than part of the model, hence a module of its own, as light
to import as the model (the store's engine needs only this).
"""

import ipaddress

STORE_DRIVERS = {
    "sqlite": "sqlite",
    "postgresql": "postgresql+psycopg",
    "postgres": "postgresql+psycopg",
    "postgresql+psycopg": "postgresql+psycopg",
}
"""What a store URL (ENVLOOP_DATABASE_URL) may start with, and the SQLAlchemy driver each opens
with: the two stores envloop installs the drivers of (PostgreSQL through psycopg 3)."""


def driver_url(url: str) -> str:
    """The URL SQLAlchemy opens: `url` with its scheme replaced by its driver's."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in STORE_DRIVERS:
        raise ValueError("expected sqlite:///PATH or postgresql://USER@HOST:PORT/DATABASE")
    return f"{STORE_DRIVERS[scheme]}://{rest}"


def upstream_address(entry: str) -> tuple[str, int]:
    """An `ENVLOOP_DNS_UPSTREAM` entry's address and port: `ADDRESS`, `ADDRESS:PORT`, `[V6]:PORT`."""
    host, port = entry, "53"
    if entry.startswith("["):
        host, _, rest = entry[1:].partition("]")
        port = rest.removeprefix(":") or port
    elif entry.count(":") == 1:
        host, port = entry.split(":")
    try:
        address = ipaddress.ip_address(host)
        number = int(port)
    except ValueError:
        raise ValueError("expected ADDRESS or ADDRESS:PORT, comma-separated") from None
    if not 0 < number < 65536:
        raise ValueError("expected a port from 1 to 65535")
    return str(address), number
