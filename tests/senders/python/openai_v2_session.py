"""The README's session pattern: a `turn` span of the app's own, with `session.id`, around
the official instrumentation's calls (opentelemetry-instrumentation-openai-v2, which sends
no session). The calls' spans and log events are exported before the turn span, in
separate requests (flushed inside the turn), as a batch processor does when a turn
outlives its export interval."""

import os

os.environ.setdefault("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")

import _common  # noqa: E402
from opentelemetry import trace  # noqa: E402
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor  # noqa: E402

SESSION = "readme-conversation-1"

providers = _common.setup("senders-openai-v2-session")
OpenAIInstrumentor().instrument()
tracer = trace.get_tracer("my-agent")
with tracer.start_as_current_span("turn", attributes={"session.id": SESSION}):
    _common.chat_calls(_common.client())
    tracer_provider, logger_provider, _ = providers
    tracer_provider.force_flush()
    logger_provider.force_flush()
_common.shutdown(providers)
