from kstool.base.errors import KstoolError, UsageError


class SchemaError(KstoolError):
    """A record that does not decode or encode with its schema (reported per record)."""


class SchemaNotFoundError(SchemaError):
    pass


class RegistryError(KstoolError):
    """The Schema Registry could not be reached or refused a request."""


class SchemaFileError(UsageError):
    """A local schema file that cannot be read or parsed."""
