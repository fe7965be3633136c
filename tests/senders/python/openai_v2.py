"""The official OpenTelemetry instrumentation (opentelemetry-instrumentation-openai-v2):
spans plus log events, with message content captured."""

import os

os.environ.setdefault("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")

import _common  # noqa: E402
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor  # noqa: E402

providers = _common.setup("senders-openai-v2")
OpenAIInstrumentor().instrument()
_common.chat_calls(_common.client())
_common.shutdown(providers)
