"""glassdesk's vision layer: the loop, the providers, the traces, and the interfaces."""

from importlib.metadata import PackageNotFoundError, version

try:
    VERSION = version("glassdesk")
except PackageNotFoundError:  # run from a source tree that was never installed
    VERSION = "0.0.0+source"
