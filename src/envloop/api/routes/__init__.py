"""The routes of the declared operations (`declared`), and one router per resource for those written
out by hand: the trajectory in two formats, health."""
