"""Exit statuses and the error type every user-facing command maps to one clear line."""

from __future__ import annotations

#: The command did what was asked and the answer is "yes" (requirements hold, the image runs).
EXIT_OK = 0
#: The command worked and the answer is "no" (requirements rejected, the image will fail).
EXIT_REJECTED = 1
#: Bad input: unknown option, unparseable version, malformed file. One line on stderr.
EXIT_USAGE = 2


class UsageError(Exception):
    """Bad input from the user; the CLI prints ``gpuconf: <message>`` and exits 2."""
#: The environment cannot do what was asked (a tool such as docker is missing, a build failed).
EXIT_ENVIRONMENT = 3
