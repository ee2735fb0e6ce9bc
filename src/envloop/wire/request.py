"""What every operation's request shares: a frozen pydantic dataclass, built on first use.

A request is a dataclass rather than a model so that its constructor takes the operation's
parameters in order, as the method of the same name on every client does (`get_job("job_…")`).
"""

from pydantic import ConfigDict

REQUEST = ConfigDict(defer_build=True)
