"""The package's version, in a module of its own.

Kept apart from `tidemill/__init__.py`, which imports every layer, so that a
low layer naming the version (the OpenTelemetry tracer, the MCP client's
handshake, the provider layer's `user-agent`) does not import the whole
package. The build reads it from here too (`[tool.hatch.version]`).
"""

__version__ = "0.1.0"
