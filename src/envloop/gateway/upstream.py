"""Where a trial's model calls go, and which addresses the gateway may connect to.

An upstream is a profile's endpoint: protocol, base URL (as each SDK takes it: OpenAI's ends in
`/v1`, Anthropic's is the root), the real key and, optionally, the model every call is sent as.
Unless the gateway was created allowing it, an upstream must be a public address: loopback,
link-local, private, shared, multicast and reserved ranges are refused, so a profile cannot turn
the gateway into a way into the worker's own services or its network. A literal address is checked
when the session opens; a name is checked each time it is resolved, and the connection goes to
the address that was checked (the resolver below is the connector's only resolver), so a name that
resolves to a private address later (DNS rebinding) is refused then too.
"""

import ipaddress
import socket
from urllib.parse import urlsplit

from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import ThreadedResolver
from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from envloop.models.settings import HttpUrlText, ModelProtocol


class UpstreamRefused(ValueError):
    """An upstream the gateway will not connect to; the message says why, without the key."""


class Upstream(BaseModel):
    # A refusal never repeats what it was given: a key, or a URL with one in it.
    model_config = ConfigDict(frozen=True, hide_input_in_errors=True)

    protocol: ModelProtocol
    base_url: HttpUrlText = Field(description="openai: the URL ending in /v1; anthropic: the root URL")
    api_key: SecretStr | None = Field(default=None, description="sent upstream as the protocol's credential")
    model: str | None = Field(
        default=None, description="when set, every call is sent as this model, whatever the agent asked"
    )

    @field_validator("base_url")
    @classmethod
    def _plain_base_url(cls, url: str) -> str:
        parts = urlsplit(url)
        if parts.username is not None or parts.password is not None:
            raise ValueError("a base URL with credentials in it is refused: give the key as api_key")
        if parts.query or parts.fragment:
            raise ValueError("a base URL with a query or fragment is refused")
        return url.rstrip("/")

    @field_validator("api_key")
    @classmethod
    def _header_safe_key(cls, key: SecretStr | None) -> SecretStr | None:
        if key is not None and not key.get_secret_value().isprintable():
            raise ValueError("the key holds a character a header cannot carry (a control character)")
        return key

    @property
    def host(self) -> str:
        return urlsplit(self.base_url).hostname or ""

    def url(self, path: str, query: str = "") -> str:
        return self.base_url + path + (f"?{query}" if query else "")


def _kind_of_refused(address: str) -> str | None:
    """What kind of non-public address this is (loopback, link-local, ...), or None when it is a
    public one. Addresses embedded in IPv6 ones (mapped, 6to4, Teredo) count as what they embed."""
    ip: ipaddress.IPv4Address | ipaddress.IPv6Address = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = ip.ipv4_mapped or ip.sixtofour or (ip.teredo[1] if ip.teredo else None)
        if embedded is not None:
            ip = embedded
    if ip.is_loopback:
        return "loopback"
    if ip.is_link_local:
        return "link-local"
    if not ip.is_global:
        return "private or reserved"
    return None


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    return True


def check_upstream(upstream: Upstream, allow_private: bool) -> None:
    """Refuse, when the session opens, an upstream given as a non-public literal address."""
    host = upstream.host
    if allow_private or not _is_address(host):
        return
    kind = _kind_of_refused(host)
    if kind is not None:
        raise UpstreamRefused(
            f"upstream {host} is a {kind} address, and this gateway allows only public upstreams"
        )


class PublicOnlyResolver(AbstractResolver):
    """Resolves names as the system does, and refuses any that gives a non-public address."""

    def __init__(self) -> None:
        self._inner = ThreadedResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        results = await self._inner.resolve(host, port, family)
        for result in results:
            kind = _kind_of_refused(result["host"])
            if kind is not None:
                address = result["host"]
                raise OSError(
                    f"{host} resolves to {address}, a {kind} address; only public upstreams are allowed"
                )
        return results

    async def close(self) -> None:
        await self._inner.close()
