"""The one error type for mistakes a user can fix (bad flag, missing data, unknown name).

Scripts catch it and print its message as a single line, without a traceback, so every
message must be one sentence that names the fix.
"""


class UsageError(ValueError):
    """A problem in the user's input, with a message that says how to fix it."""


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite; the message names the step and what to do."""
