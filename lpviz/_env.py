"""Settings read from the environment."""

import os


def env_count(name, default, minimum=1):
    """The whole number in ``$name`` (``default`` when unset or blank); a ValueError naming the
    variable when it is not a whole number or is below ``minimum``."""
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        count = int(text)
    except ValueError:
        raise ValueError(f"{name} must be a whole number >= {minimum}, got {text!r}") from None
    if count < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {count}")
    return count
