"""One router per resource; each route is a thin call into the service layer."""
