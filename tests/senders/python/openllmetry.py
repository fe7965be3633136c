"""OpenLLMetry (Traceloop's opentelemetry-instrumentation-openai), content traced."""

import os

os.environ.setdefault("TRACELOOP_TRACE_CONTENT", "true")

import _common  # noqa: E402
from opentelemetry.instrumentation.openai import OpenAIInstrumentor  # noqa: E402

providers = _common.setup("senders-openllmetry")
OpenAIInstrumentor().instrument()
_common.chat_calls(_common.client())
_common.shutdown(providers)
