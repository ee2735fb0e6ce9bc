"""Options that several commands take, declared once: the same flag and help wherever one appears
(a worker's defaults are in `envloop.core.capacity`)."""

from typing import Annotated

import typer

JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout.")]

LeaseTtlOpt = Annotated[
    float,
    typer.Option("--lease-ttl", min=1, help="Seconds before a silent worker's trials are re-run."),
]

RayAddressOpt = Annotated[
    str | None,
    typer.Option("--ray-address", help="The Ray cluster (host:port; default RAY_ADDRESS, else auto)."),
]
