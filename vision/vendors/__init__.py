"""glassdesk in vendors' own terms: the vendor-native executors (computer.py: Anthropic, OpenAI and
Gemini tool calls run as they are), the vendors' browser toolsets (browser_toolset.py) and the
conformance suites that hold each provider to its vendor's wire format (conformance.py,
conformance_desktop.py). The providers and converters the loop uses are vision.providers and
vision.converters."""
