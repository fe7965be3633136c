"""What every Python driver shares: OTLP/HTTP protobuf exporters for traces, logs and
metrics (to OTEL_EXPORTER_OTLP_ENDPOINT, which the exporters read themselves), an OpenAI
client for OPENAI_BASE_URL, and the calls every driver makes.

Each driver instruments the openai client with one library, runs `chat_calls`, then
`shutdown` flushes everything before the process exits 0."""

import json
import os
import sys

from opentelemetry import _logs, metrics, trace
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

# The conversation every driver has; the tests look for these texts.
SYSTEM_PROMPT = "You are a terse assistant."
USER_PROMPT = "What is the capital of France?"
TOOL_PROMPT = "What is the weather in Paris?"
TOOL_RESULT = '{"city": "Paris", "forecast": "sunny, 24 C"}'
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather forecast for a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
MODEL = "gpt-4o-mini"


def require_env(name):
    value = os.environ.get(name)
    if not value:
        sys.exit(f"{name} is not set")
    return value


def setup(service_name):
    """Installs global tracer, logger and meter providers exporting OTLP/HTTP protobuf."""
    require_env("OTEL_EXPORTER_OTLP_ENDPOINT")
    resource = Resource.create({"service.name": service_name})
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(tracer_provider)
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(BatchLogRecordProcessor(OTLPLogExporter()))
    _logs.set_logger_provider(logger_provider)
    # A long interval: the only export is the one shutdown forces.
    reader = PeriodicExportingMetricReader(OTLPMetricExporter(), export_interval_millis=3_600_000)
    meter_provider = MeterProvider(resource=resource, metric_readers=[reader])
    metrics.set_meter_provider(meter_provider)
    return tracer_provider, logger_provider, meter_provider


def client():
    from openai import OpenAI

    # The fake server checks nothing about the key; max_retries=0 so a failure is loud.
    return OpenAI(base_url=require_env("OPENAI_BASE_URL"), api_key="sk-roost-tests", max_retries=0)


def chat_calls(openai_client):
    """One plain chat completion, then a tool round: the model asks for get_weather, the
    tool's result goes back, the model answers."""
    plain = openai_client.chat.completions.create(
        model=MODEL,
        messages=[
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": USER_PROMPT},
        ],
    )
    print("plain:", plain.choices[0].message.content)

    messages = [{"role": "user", "content": TOOL_PROMPT}]
    asked = openai_client.chat.completions.create(model=MODEL, messages=messages, tools=[WEATHER_TOOL])
    call = asked.choices[0].message.tool_calls[0]
    print("tool call:", call.function.name, call.function.arguments)
    messages.append(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.function.name, "arguments": call.function.arguments},
                }
            ],
        }
    )
    messages.append({"role": "tool", "tool_call_id": call.id, "content": TOOL_RESULT})
    answered = openai_client.chat.completions.create(model=MODEL, messages=messages, tools=[WEATHER_TOOL])
    print("after tool:", answered.choices[0].message.content)
    json.dumps(answered.model_dump())  # the response parsed completely


def shutdown(providers):
    """Shutting a provider down exports what it holds (the meter provider: one final
    collection, so each metric is sent once)."""
    for provider in providers:
        provider.shutdown()
