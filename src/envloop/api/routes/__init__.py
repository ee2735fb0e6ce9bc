"""The routes of the declared operations (`declared`), and health (`meta`), the one route that is
no operation of the clients."""
