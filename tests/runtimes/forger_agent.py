#!/usr/bin/env python3
"""A process runtime (stdlib only) that forges telemetry, for roost's tests of what an
agent's own token may claim.

It serves roost's process contract (GET /ready -> 200; POST /turn {"turn_id", "text"} ->
{"reply"} on 127.0.0.1:$PORT). A turn's text is JSON:

  {"victim": "ins_...", "trace_id": "<32 hex>", "span_id": "<16 hex>", "text": "..."}

and the runtime sends roost, over OTLP/HTTP JSON at $OTEL_EXPORTER_OTLP_ENDPOINT with its
own credentials ($OTEL_EXPORTER_OTLP_HEADERS, its agent token), telemetry that claims to be
the victim's: every session, conversation, instance and agent id it can name is the
victim's (on the items and on their resource), with a model call of a billion tokens and
its own $11,250 cost, a user message saying `text`, a coding agent's api_request event with
tokens and a cost, evaluation events scoring its own call and trace, and token and cost
metrics. It replies with the HTTP status roost gave
each export, as JSON: {"traces": 200, "logs": 200, "metrics": 200}.
"""

import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def s(value):
    return {"stringValue": value}


def i(value):
    return {"intValue": str(value)}


def attrs(pairs):
    return [{"key": k, "value": v} for k, v in pairs.items()]


def claims(victim):
    """Every name roost reads a session or an agent from, all naming the victim, and roost's
    own marks set the other way."""
    return {
        "session.id": s(victim),
        "gen_ai.conversation.id": s(victim),
        "roost.instance.id": s(victim),
        "gen_ai.agent.id": s(victim),
        "gen_ai.agent.name": s(victim),
        "conversation.id": s(victim),
        "session_id": s(victim),
        "agent_id": s(victim),
        "roost.account.id": s("acct_forged"),
        "roost.self_reported": {"boolValue": False},
    }


def resource(victim, service):
    return {"attributes": attrs({"service.name": s(service), **claims(victim)})}


def export(path, body):
    """POSTs one OTLP/JSON export to roost as an instrumented agent would; the status."""
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").rstrip("/")
    headers = {"Content-Type": "application/json"}
    for pair in os.environ.get("OTEL_EXPORTER_OTLP_HEADERS", "").split(","):
        key, _, value = pair.partition("=")
        if key:
            headers[key.strip()] = urllib.parse.unquote(value.strip())
    request = urllib.request.Request(endpoint + path, data=json.dumps(body).encode(), headers=headers, method="POST")
    # roost is on loopback: never through the egress proxy in the environment.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as err:
        return err.code


def forge(ask):
    victim, text = ask["victim"], ask["text"]
    now = time.time_ns()
    usage = {
        "gen_ai.usage.input_tokens": i(1_000_000_000),
        "gen_ai.usage.output_tokens": i(500_000_000),
        "gen_ai.usage.cost": {"doubleValue": 11250.0},
    }
    span = {
        "traceId": ask["trace_id"],
        "spanId": ask["span_id"],
        "name": "chat gpt-4o",
        "kind": 3,
        "startTimeUnixNano": str(now),
        "endTimeUnixNano": str(now + 1_000_000),
        "attributes": attrs({
            "gen_ai.operation.name": s("chat"),
            "gen_ai.provider.name": s("openai"),
            "gen_ai.request.model": s("gpt-4o"),
            "gen_ai.response.model": s("gpt-4o"),
            **usage,
            "gen_ai.prompt.0.role": s("user"),
            "gen_ai.prompt.0.content": s(text),
            **claims(victim),
        }),
        "events": [
            {"timeUnixNano": str(now), "name": "claimed", "attributes": attrs(claims(victim))},
            # Grading itself: an evaluation event on its own call.
            {"timeUnixNano": str(now), "name": "gen_ai.evaluation.result", "attributes": attrs({
                "gen_ai.evaluation.name": s("quality"), "gen_ai.evaluation.score.value": {"doubleValue": 1.0},
            })},
        ],
    }
    traces = {"resourceSpans": [{
        "resource": resource(victim, "forged-app"),
        "scopeSpans": [{"scope": {"name": "forger"}, "spans": [span]}],
    }]}
    records = [
        {
            "timeUnixNano": str(now),
            "eventName": "gen_ai.user.message",
            "traceId": ask["trace_id"],
            "spanId": ask["span_id"],
            "body": {"kvlistValue": {"values": [{"key": "content", "value": s(text)}]}},
            "attributes": attrs({"gen_ai.system": s("openai"), **claims(victim)}),
        },
        {
            # A coding agent's model call, reported as a log event with tokens and a cost.
            "timeUnixNano": str(now),
            "eventName": "claude_code.api_request",
            "body": s("claude_code.api_request"),
            "attributes": attrs({
                "model": s("claude-sonnet-4-5"),
                "input_tokens": i(1_000_000_000),
                "output_tokens": i(500_000_000),
                "cost_usd": s("11250"),
                **claims(victim),
            }),
        },
        {
            # Grading a trace, as an evaluator's log event would (named by the event.name
            # attribute, as older SDKs send it).
            "timeUnixNano": str(now),
            "traceId": ask["trace_id"],
            "attributes": attrs({
                "event.name": s("gen_ai.evaluation.result"),
                "gen_ai.evaluation.name": s("helpful"),
                "gen_ai.evaluation.score.label": s("yes"),
                **claims(victim),
            }),
        },
    ]
    logs = {"resourceLogs": [{
        "resource": resource(victim, "forged-app"),
        "scopeLogs": [{"scope": {"name": "forger"}, "logRecords": records}],
    }]}
    # Metrics under a service of their own, which reports no calls: metrics count there.
    point = {"timeUnixNano": str(now), "startTimeUnixNano": str(now - 1_000_000_000)}
    metrics = {"resourceMetrics": [{
        "resource": resource(victim, "forged-metrics"),
        "scopeMetrics": [{"scope": {"name": "forger"}, "metrics": [
            {"name": "gen_ai.client.token.usage", "unit": "{token}", "histogram": {
                "aggregationTemporality": 1,
                "dataPoints": [{**point, "count": "1", "sum": 1e9, "attributes": attrs({
                    "gen_ai.token.type": s("input"), "gen_ai.request.model": s("gpt-4o"), **claims(victim),
                })}],
            }},
            {"name": "claude_code.cost.usage", "unit": "USD", "sum": {
                "aggregationTemporality": 1,
                "isMonotonic": True,
                "dataPoints": [{**point, "asDouble": 11250.0, "attributes": attrs({
                    "model": s("claude-sonnet-4-5"), **claims(victim),
                })}],
            }},
        ]}],
    }]}
    return {"traces": export("/v1/traces", traces), "logs": export("/v1/logs", logs),
            "metrics": export("/v1/metrics", metrics)}


class Agent(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, *args):
        pass

    def reply(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.reply(200 if self.path == "/ready" else 404, {})

    def do_POST(self):
        if self.path != "/turn":
            self.reply(404, {})
            return
        length = int(self.headers.get("Content-Length", "0"))
        text = json.loads(self.rfile.read(length) or b"{}").get("text", "")
        try:
            reply = json.dumps(forge(json.loads(text)))
        except (ValueError, KeyError, TypeError):
            # Not a forgery order: an ordinary turn.
            reply = "ok: " + text
        self.reply(200, {"reply": reply})


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", int(os.environ["PORT"])), Agent).serve_forever()
