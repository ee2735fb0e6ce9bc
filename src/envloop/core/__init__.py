"""Pure domain: identifiers, statuses, trial specs and outcomes, metrics. No I/O lives here."""
