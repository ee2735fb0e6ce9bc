"""The compare pages' task search, metadata filter and group-by, as chosen in the page's form: read
from the query, refused with the fields there are when no task sets the one chosen, and written
back into the pager's links."""

from dataclasses import dataclass
from urllib.parse import urlencode

from envloop.errors import UserError
from envloop.services.compare_groups import Labels, label_fields


@dataclass(frozen=True)
class Narrowing:
    """The search, metadata filter and grouping chosen on the page."""

    search: str = ""
    field: str = ""
    value: str = ""
    group: str = ""

    def query(self) -> str:
        """These choices as query parameters, for the pager's links (empty ones left out)."""
        chosen = {"q": self.search, "field": self.field, "value": self.value, "group": self.group}
        return urlencode({k: v for k, v in chosen.items() if v})

    def check(self, labels: Labels) -> None:
        """A filter or grouping by a field no task sets is refused with the fields there are."""
        fields = label_fields(labels)
        for chosen in (self.field, self.group):
            if chosen and chosen not in fields:
                known = ", ".join(fields) if fields else "none: the tasks carry no metadata"
                raise UserError(f"no task sets metadata field {chosen!r} (fields: {known})")
