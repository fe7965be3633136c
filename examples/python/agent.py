"""A small agent app that sends its telemetry to roost: README step 4, runnable.

It holds one conversation of two turns with a model through the official OpenAI SDK: in
the first the model calls a tool (get_weather) and gets its result back, then answers; the
second is a plain follow-up. That is three model calls. The
official OpenTelemetry instrumentation (opentelemetry-instrumentation-openai-v2) turns
each model call into a span with its model and tokens, and its prompt and reply into log
records; roost prices the calls and keeps the messages.

The instrumentation sends no session id, so each turn runs inside a span of the app's own
("turn") with `session.id` set: roost puts the turn's whole trace, model calls included,
in that session (README step 4, "Sessions").

Why it instruments in code rather than under `opentelemetry-instrument`: the wrapper
(opentelemetry-distro) loads instrumentations by entry point and, when one fails to
import (as openai-v2 does with an unpinned opentelemetry-util-genai or without httpx),
carries on without it and says nothing, so the app runs and roost gets no model call.
Importing OpenAIInstrumentor here fails loudly instead, and needs no distro, no
OTEL_*_EXPORTER settings and no log-export switch.

Settings, all from the environment (the defaults fit `roost serve` and `roost fake-model`
on this machine):
  OPENAI_BASE_URL   http://127.0.0.1:8901/v1 (roost fake-model); any OpenAI-compatible API
  OPENAI_API_KEY    a dummy key (the fake model checks none)
  EXAMPLE_MODEL     gpt-4o-mini
  OTEL_EXPORTER_OTLP_ENDPOINT                         http://127.0.0.1:8900 (roost)
  OTEL_EXPORTER_OTLP_PROTOCOL                         http/protobuf (the exporter installed)
  OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT  true (send prompts and replies)
  OTEL_SERVICE_NAME                                   my-agent
and the other OTEL_* variables the SDK reads (OTEL_EXPORTER_OTLP_HEADERS,
OTEL_RESOURCE_ATTRIBUTES, ...).

Run: python agent.py (see README.md beside it).
"""

import json
import os
import sys
import uuid

DEFAULTS = {
    "OPENAI_BASE_URL": "http://127.0.0.1:8901/v1",
    "OPENAI_API_KEY": "sk-fake-model-needs-no-key",
    "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:8900",
    "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true",
    "OTEL_SERVICE_NAME": "my-agent",
}
# Before the OpenTelemetry and OpenAI modules are imported: some read them at import.
for name, value in DEFAULTS.items():
    if not os.environ.get(name):
        os.environ[name] = value

if os.environ["OTEL_EXPORTER_OTLP_PROTOCOL"] != "http/protobuf":
    sys.exit(
        "agent.py exports OTLP over http/protobuf only (the exporter requirements.txt installs); "
        f"OTEL_EXPORTER_OTLP_PROTOCOL is {os.environ['OTEL_EXPORTER_OTLP_PROTOCOL']!r}"
    )

import openai  # noqa: E402
from opentelemetry import _logs, metrics, trace  # noqa: E402
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter  # noqa: E402
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter  # noqa: E402
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # noqa: E402
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor  # noqa: E402
from opentelemetry.sdk._logs import LoggerProvider  # noqa: E402
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor  # noqa: E402
from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader  # noqa: E402
from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import BatchSpanProcessor  # noqa: E402

MODEL = os.environ.get("EXAMPLE_MODEL") or "gpt-4o-mini"
SYSTEM_PROMPT = "You are a helpful, brief assistant. Use the tools you are given."
TURNS = [
    "What is the weather in Paris?",
    "Thanks! Should I take an umbrella?",
]
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather forecast for a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "The city, e.g. Paris"}},
            "required": ["city"],
        },
    },
}


def get_weather(city):
    """The tool: a made-up forecast (a real app would call a weather service)."""
    return {"city": city, "forecast": "sunny", "temperature_c": 24}


TOOLS = {"get_weather": get_weather}


def setup_telemetry():
    """Global tracer, logger and meter providers exporting OTLP/HTTP protobuf; the
    exporters read OTEL_EXPORTER_OTLP_ENDPOINT (and _HEADERS) themselves, the resource
    OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES."""
    resource = Resource.create()
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(tracer_provider)
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(BatchLogRecordProcessor(OTLPLogExporter()))
    _logs.set_logger_provider(logger_provider)
    meter_provider = MeterProvider(resource=resource, metric_readers=[PeriodicExportingMetricReader(OTLPMetricExporter())])
    metrics.set_meter_provider(meter_provider)
    # After the providers: the instrumentation takes its tracer, logger and meter from them.
    OpenAIInstrumentor().instrument()
    return tracer_provider, logger_provider, meter_provider


def take_turn(client, messages, text):
    """One turn: the user's message, then model calls until the model answers without
    calling a tool (each tool call is run and its result sent back)."""
    messages.append({"role": "user", "content": text})
    print(f"user: {text}")
    while True:
        response = client.chat.completions.create(model=MODEL, messages=messages, tools=[WEATHER_TOOL])
        message = response.choices[0].message
        if not message.tool_calls:
            messages.append({"role": "assistant", "content": message.content})
            print(f"assistant: {message.content}")
            return
        messages.append(
            {
                "role": "assistant",
                "content": message.content,
                "tool_calls": [
                    {"id": c.id, "type": "function", "function": {"name": c.function.name, "arguments": c.function.arguments}}
                    for c in message.tool_calls
                ],
            }
        )
        for call in message.tool_calls:
            arguments = json.loads(call.function.arguments or "{}")
            result = TOOLS[call.function.name](**arguments)
            print(f"tool: {call.function.name}({arguments}) -> {result}")
            messages.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)})


def main():
    providers = setup_telemetry()
    tracer = trace.get_tracer("my-agent")
    client = openai.OpenAI()  # OPENAI_BASE_URL, OPENAI_API_KEY
    session_id = f"conversation-{uuid.uuid4().hex[:12]}"
    print(f"session: {session_id}")
    messages = [{"role": "system", "content": SYSTEM_PROMPT}]
    try:
        for number, text in enumerate(TURNS, start=1):
            # The app's own span around the turn puts its trace in the session.
            with tracer.start_as_current_span("turn", attributes={"session.id": session_id, "turn.number": number}):
                take_turn(client, messages, text)
    except openai.APIConnectionError as err:
        sys.exit(
            f"cannot reach the model at {os.environ['OPENAI_BASE_URL']} ({err}): start `roost fake-model`, "
            "or set OPENAI_BASE_URL and OPENAI_API_KEY to your own upstream"
        )
    finally:
        # Shutting the providers down exports everything they hold.
        for provider in providers:
            provider.shutdown()
    dashboard = os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"].rstrip("/")
    print(f"done: the session is at {dashboard}/dashboard/sessions/{session_id}")


if __name__ == "__main__":
    main()
