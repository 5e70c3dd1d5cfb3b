"""The one exception type for bad user input: raised before anything is launched."""


class ConfigError(ValueError):
    """A user-facing error: one line naming the key, the value, what is allowed and the fix."""
