"""The command line, a door like HTTP and MCP: ``glassdesk`` (vision.cli.command: up, act, mcp, qa)
and its ``qa`` subcommand's suite runner (vision.cli.qa)."""

from vision.cli.command import build_parser, main

__all__ = ["build_parser", "main"]
