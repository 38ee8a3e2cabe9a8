"""Model configuration: `glassdesk.toml` plus the SDKs' standard environment variables.

```toml
default_model = "anthropic/claude-sonnet-4-5"      # else: Anthropic if ANTHROPIC_API_KEY is set,
                                                   # OpenAI if OPENAI_API_KEY is, Gemini if
                                                   # GEMINI_API_KEY is, else "ocr"
[aliases]                                          # short names, and pinned versions
claude = "anthropic/claude-sonnet-4-5-20250929"

[models."anthropic/claude-sonnet-4-5-20250929"]    # keyword arguments for that provider
max_tokens = 4096

[models."chat/ui-tars-1.5-7b"]
base_url = "http://127.0.0.1:8000/v1"
dialect = "uitars-1.5"
```

API keys are never read from this file: they come from ANTHROPIC_API_KEY / OPENAI_API_KEY /
GEMINI_API_KEY only,
so the file can be committed and nothing secret reaches a trace or a log.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from desktop.errors import InvalidRequest
from vision.errors import ModelUnavailable
from vision.providers.base import Provider

FAMILIES = ("anthropic", "openai", "gemini", "chat", "ocr", "scripted")
DEFAULT_ANTHROPIC = "anthropic/claude-sonnet-4-5"
DEFAULT_OPENAI = "openai/computer-use-preview"
DEFAULT_GEMINI = "gemini/gemini-2.5-computer-use-preview-10-2025"
# Option names that carry credentials, compared without case, "-" or "_" (api-key, x_api_key...).
SECRET_NAMES = {"apikey", "xapikey", "token", "accesstoken", "authorization", "password", "secret",
                "defaultheaders", "headers"}


def _secret_options(options: dict, path: str = "") -> list[str]:
    """Names of options, nested tables included, that would put a credential in the file."""
    found = []
    for key, value in options.items():
        name = f"{path}{key}"
        if re.sub(r"[-_]", "", key.lower()) in SECRET_NAMES:
            found.append(name)
        elif isinstance(value, dict):
            found += _secret_options(value, f"{name}.")
    return found

ENVIRONMENT = (
    "You are operating a real Linux desktop (XFCE) that a person is watching live. The display is "
    "1920x1080; you see it at the size stated with each screenshot. Chromium is already open and "
    "maximised. Work step by step, check the screen after each action, and when the task is complete "
    "stop and say what you found."
)


@dataclass
class VisionConfig:
    default_model: str | None = None
    aliases: dict[str, str] = field(default_factory=dict)
    models: dict[str, dict[str, Any]] = field(default_factory=dict)
    path: Path | None = None

    @classmethod
    def load(cls, path: str | os.PathLike | None = None) -> VisionConfig:
        """Read GLASSDESK_CONFIG, or ./glassdesk.toml if present; a missing default file is fine."""
        explicit = path or os.environ.get("GLASSDESK_CONFIG")
        file = Path(explicit) if explicit else Path("glassdesk.toml")
        if not file.exists():
            if explicit:
                raise SystemExit(f"config file {file} not found")
            return cls()
        try:
            data = tomllib.loads(file.read_text())
        except tomllib.TOMLDecodeError as exc:
            raise SystemExit(f"{file}: {exc}") from exc
        models = data.get("models", {})
        for name, options in models.items():
            leaked = _secret_options(options)
            if leaked:
                raise SystemExit(f"{file}: [models.\"{name}\"] sets {', '.join(sorted(leaked))}; put API keys in "
                                 "the environment (ANTHROPIC_API_KEY / OPENAI_API_KEY / GEMINI_API_KEY), never in the "
                                 "config file")
        return cls(default_model=data.get("default_model"), aliases=data.get("aliases", {}), models=models, path=file)

    def resolve(self, model: str | None) -> str:
        """The full ``family/model`` name for a request's model (or the default)."""
        name = model or self.default_model or _default_from_environment()
        name = self.aliases.get(name, name)
        family = name.split("/", 1)[0]
        if family not in FAMILIES:
            raise ModelUnavailable(f"model {name!r}: use one of {', '.join(f + '/<model>' for f in FAMILIES[:4])}, "
                                   "'ocr' or 'scripted' (or an alias from glassdesk.toml)")
        if family in ("anthropic", "openai", "gemini", "chat") and "/" not in name:
            raise ModelUnavailable(f"model {name!r} needs a model name after the family, e.g. {family}/<model>")
        return name


def _default_from_environment() -> str:
    if os.environ.get("ANTHROPIC_API_KEY"):
        return DEFAULT_ANTHROPIC
    if os.environ.get("OPENAI_API_KEY"):
        return DEFAULT_OPENAI
    if os.environ.get("GEMINI_API_KEY"):
        return DEFAULT_GEMINI
    return "ocr"


def create_provider(name: str | Provider, instruction: str, config: VisionConfig, *,
                    script: list[dict] | None = None, tools: Sequence[str] | None = None) -> Provider:
    """Build the provider for a resolved model name, with its configured options. A Provider
    instance is used as it is (an embedder's own model code, a test double)."""
    if isinstance(name, Provider):
        name.instruction = name.instruction or instruction
        return name
    family, _, model = name.partition("/")
    options = dict(config.models.get(name, {}))
    if tools is not None and family != "anthropic" and list(tools) != ["computer"]:
        raise InvalidRequest(f"tools: {', '.join(tools)} is Anthropic's; only anthropic/ models take it")
    cls: type[Provider]  # imported for its family alone: a provider's SDK takes seconds to import
    if family == "anthropic":
        from vision.providers.anthropic import AnthropicProvider
        cls = AnthropicProvider
        if tools is not None:
            options["tools"] = list(tools)
    elif family == "openai":
        from vision.providers.openai import OpenAIProvider
        cls = OpenAIProvider
    elif family == "gemini":
        from vision.providers.gemini import GeminiProvider
        cls = GeminiProvider
    elif family == "chat":
        from vision.providers.chat import ChatProvider
        cls = ChatProvider
    elif family == "ocr":
        from vision.providers.ocr import OcrProvider
        cls = OcrProvider
        model = model or "rapidocr"
    else:
        from vision.providers.scripted import ScriptedProvider
        cls = ScriptedProvider
        options["script"] = script
        model = "scripted"
    try:
        return cls(instruction, model=model, system=ENVIRONMENT, **options)
    except TypeError as exc:  # an unknown option in glassdesk.toml
        raise ModelUnavailable(f"model {name!r}: bad option in {config.path or 'config'}: {exc}") from exc
