"""The operations envloop offers, each declared once, and the base both clients share.

- `operation`: what a declaration is (`Operation`), and how a request becomes a URL, a query, a
  body, or a call of the service function;
- `kinds`: the declarations whose answer is not one JSON document (`Events`, `Download`, `Upload`);
- `declared`: every operation envloop offers (`Declarations`);
- `services`: the service functions they name, imported when first called;
- `base`: `Operations`, the declarations as methods, which `envloop.Client` and
  `envloop.LocalClient` implement.

Why it is made this way, and the files adding an operation touches: docs/design/operations.md.
"""

from envloop.operations.base import Operations

__all__ = ["Operations"]
