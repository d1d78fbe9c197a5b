"""Every error a user can cause is an HlogenError, raised at the call that caused it."""


class HlogenError(Exception):
    """Base of every error a user of hlogen can cause."""


class ShapeError(HlogenError, ValueError):
    """An op's operands, element types or attributes break a rule of the spec.

    The message names the op, the argument, the shapes involved and the rule.
    """


class InputError(HlogenError, ValueError):
    """Bad input: a file that cannot be read or parsed, a malformed literal, or
    arguments that do not match a computation's parameters."""


class UnsupportedError(HlogenError):
    """The feature exists in the spec but the chosen backend cannot run it."""


class ExecutionError(HlogenError, RuntimeError):
    """Compiling or running a computation failed on the backend."""
