#!/usr/bin/env python3
"""roost's example process runtime: one process per hosted agent.

roost starts it with the agent's settings in the environment and talks to it over HTTP on
127.0.0.1:$PORT:

  GET  /ready  -> 200 once the agent can take turns
  POST /turn   {"turn_id": "...", "text": "..."}
               -> 200 {"reply": "...", "usage": {"input_tokens": N, "output_tokens": N},
                       "model": "..."}
               or, when roost's Accept names text/event-stream (its caller streams the
               turn), a text/event-stream: `delta` events {"text"} with the reply as it
               is written, then one `done` {"usage", "model"} (its optional "reply"
               defaults to the deltas joined), or `error` {"error"}

Environment: PORT, AGENT_BRIEF, MODEL_MODE (managed|byok), MODEL, ROOST_INSTANCE_ID,
ROOST_WORKSPACE (also HOME and the working directory: the agent's own files, kept until
it is destroyed), OTEL_EXPORTER_OTLP_ENDPOINT and _HEADERS, and roost's model gateway as the OpenAI and
Anthropic SDKs read it: OPENAI_BASE_URL, OPENAI_API_KEY, ANTHROPIC_BASE_URL,
ANTHROPIC_API_KEY. The agent's own provider key and bot token stay in roost.

The reply is "[<brief>] <text>". A few messages are directives, for trying roost's turn
handling by hand and in its tests:

  sleep:<ms> <text>   wait <ms> milliseconds, then reply
  crash               exit at once (roost reports the agent failed)
  garbage             answer something that is not the protocol
  env                 reply with the settings this process started with, as JSON (the
                      secrets only as set or not and their SHA-256, never themselves)
  stats               reply with this process's turn order and peak concurrency, as JSON
  tool:<name> <args>  report a call of tool <name> with arguments <args> as a GenAI span,
                      over OTLP/JSON to roost with this process's own credentials
                      (OTEL_EXPORTER_OTLP_HEADERS), then reply with the status roost gave
  spend:<usd>         report a model call that cost <usd> the same way
  keep <name> <text>  write <text> to the file <name> in the workspace
  recall <name>       reply with what the workspace's file <name> holds
  model <text>        ask the model (through roost's model gateway, OpenAI-style) and
                      reply with its answer, or with the gateway's error

EXAMPLE_BOOT_DELAY_MS delays readiness, to see a slow boot.
"""

import hashlib
import json
import os
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

BRIEF = os.environ.get("AGENT_BRIEF", "")
MODEL = os.environ.get("MODEL") or "example"

lock = threading.Lock()
active = 0
peak = 0
order = []


def digest(name):
    value = os.environ.get(name)
    return hashlib.sha256(value.encode()).hexdigest() if value else ""


def settings():
    return {
        "brief": BRIEF,
        "model_mode": os.environ.get("MODEL_MODE", ""),
        "model": MODEL,
        "provider_api_key_set": bool(os.environ.get("PROVIDER_API_KEY")),
        "messaging_bot_token_set": bool(os.environ.get("MESSAGING_BOT_TOKEN")),
        "provider_api_key_sha256": digest("PROVIDER_API_KEY"),
        "messaging_bot_token_sha256": digest("MESSAGING_BOT_TOKEN"),
        "otlp_endpoint": os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", ""),
        "openai_base_url": os.environ.get("OPENAI_BASE_URL", ""),
        "anthropic_base_url": os.environ.get("ANTHROPIC_BASE_URL", ""),
        "gateway_token_set": os.environ.get("OPENAI_API_KEY", "").startswith("rat_")
        and os.environ.get("ANTHROPIC_API_KEY") == os.environ.get("OPENAI_API_KEY"),
        "instance_id": os.environ.get("ROOST_INSTANCE_ID", ""),
        "workspace": os.environ.get("ROOST_WORKSPACE", ""),
        "home": os.environ.get("HOME", ""),
        "cwd": os.getcwd(),
        "pid": os.getpid(),
    }


def report_span(name, attributes):
    """Sends one span to roost as an instrumented agent would; the HTTP status."""
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").rstrip("/")
    headers = {"Content-Type": "application/json"}
    for pair in os.environ.get("OTEL_EXPORTER_OTLP_HEADERS", "").split(","):
        key, _, value = pair.partition("=")
        if key:
            headers[key.strip()] = urllib.parse.unquote(value.strip())
    now = time.time_ns()
    span = {
        "traceId": os.urandom(16).hex(),
        "spanId": os.urandom(8).hex(),
        "name": name,
        "startTimeUnixNano": str(now),
        "endTimeUnixNano": str(now + 1000),
        "attributes": [{"key": k, "value": v} for k, v in attributes.items()],
    }
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": os.environ.get("OTEL_SERVICE_NAME", "example")}}]}
    body = json.dumps({"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": [span]}]}]}).encode()
    request = urllib.request.Request(endpoint + "/v1/traces", data=body, headers=headers, method="POST")
    # roost is on loopback: never through a proxy from the environment.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as err:
        return err.code


def ask_model(prompt):
    """One chat completion through roost's model gateway; the answer, or the error."""
    base = os.environ.get("OPENAI_BASE_URL", "").rstrip("/")
    body = json.dumps({"model": MODEL, "messages": [
        {"role": "system", "content": BRIEF},
        {"role": "user", "content": prompt},
    ]}).encode()
    headers = {"Content-Type": "application/json", "Authorization": "Bearer " + os.environ.get("OPENAI_API_KEY", "")}
    request = urllib.request.Request(base + "/chat/completions", data=body, headers=headers, method="POST")
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=60) as response:
            return json.load(response)["choices"][0]["message"]["content"] or ""
    except urllib.error.HTTPError as err:
        return "model error %d: %s" % (err.code, err.read().decode(errors="replace"))


def answer(text):
    if text.startswith("model "):
        return ask_model(text[len("model "):])
    if text.startswith("tool:"):
        tool, _, arguments = text[len("tool:"):].partition(" ")
        status = report_span("execute_tool " + tool, {
            "gen_ai.operation.name": {"stringValue": "execute_tool"},
            "gen_ai.tool.name": {"stringValue": tool},
            "gen_ai.tool.call.arguments": {"stringValue": arguments},
        })
        return "[%s] reported %s: %d" % (BRIEF, tool, status)
    if text.startswith("spend:"):
        status = report_span("chat " + MODEL, {
            "gen_ai.operation.name": {"stringValue": "chat"},
            "gen_ai.request.model": {"stringValue": MODEL},
            "gen_ai.usage.input_tokens": {"intValue": "1"},
            "gen_ai.usage.cost": {"doubleValue": float(text[len("spend:"):])},
        })
        return "[%s] reported spend: %d" % (BRIEF, status)
    if text == "env":
        return json.dumps(settings(), sort_keys=True)
    if text.startswith("keep "):
        # A file in the working directory (the agent's workspace).
        name, _, content = text[len("keep "):].partition(" ")
        with open(os.path.basename(name), "w") as out:
            out.write(content)
        return "[%s] kept %s" % (BRIEF, name)
    if text.startswith("recall "):
        name = os.path.basename(text[len("recall "):])
        try:
            with open(name) as kept:
                return "[%s] %s" % (BRIEF, kept.read())
        except FileNotFoundError:
            return "[%s] no %s" % (BRIEF, name)
    if text == "stats":
        with lock:
            return json.dumps({"order": order, "peak_concurrency": peak}, sort_keys=True)
    if text == "nul":
        # A reply holding U+0000, which PostgreSQL text cannot store (roost's tests use it).
        return "[%s] a\x00b" % BRIEF
    if text.startswith("sleep:"):
        delay, _, rest = text[len("sleep:"):].partition(" ")
        time.sleep(int(delay) / 1000)
        text = rest
    return "[%s] %s" % (BRIEF, text)


class Agent(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # The headers and the body are two writes: without TCP_NODELAY the body waits for
    # the client's delayed ACK of the headers (~40 ms a turn).
    disable_nagle_algorithm = True

    def send_json(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/ready":
            self.send_json(200, {"ok": True})
        else:
            self.send_json(404, {"error": "not found"})

    def do_POST(self):
        global active, peak
        if self.path != "/turn":
            self.send_json(404, {"error": "not found"})
            return
        length = int(self.headers.get("Content-Length", "0"))
        turn = json.loads(self.rfile.read(length) or b"{}")
        text = turn.get("text", "")
        if text == "crash":
            os._exit(3)
        if text == "garbage":
            data = b"this is not JSON"
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        with lock:
            active += 1
            peak = max(peak, active)
            if text not in ("stats", "env"):
                order.append(text)
        try:
            if "text/event-stream" in self.headers.get("Accept", ""):
                self.stream(text)
                return
            reply = answer(text)
        finally:
            with lock:
                active -= 1
        usage = {"input_tokens": len(text.split()), "output_tokens": len(reply.split())}
        self.send_json(200, {"reply": reply, "usage": usage, "model": MODEL})

    def stream(self, text):
        """The streamed answer roost asks for when its caller streams the turn: the reply
        word by word as `delta` events, then `done`. `sleep:<ms> <text>` sends the first
        words before it sleeps, so a caller sees text while the turn still runs."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

        def event(name, body):
            self.wfile.write(("event: %s\ndata: %s\n\n" % (name, json.dumps(body))).encode())
            self.wfile.flush()

        try:
            if text.startswith("sleep:"):
                delay, _, rest = text[len("sleep:"):].partition(" ")
                event("delta", {"text": "[%s] " % BRIEF})
                time.sleep(int(delay) / 1000)
                reply = "[%s] %s" % (BRIEF, rest)
                words = rest.split(" ")
            else:
                reply = answer(text)
                words = reply.split(" ")
            for i, word in enumerate(words):
                event("delta", {"text": word if i == 0 else " " + word})
            usage = {"input_tokens": len(text.split()), "output_tokens": len(reply.split())}
            event("done", {"usage": usage, "model": MODEL})
        except (BrokenPipeError, ConnectionResetError):
            pass  # roost hung up: the caller went away and the turn was cancelled

    def log_message(self, fmt, *args):
        pass


def main():
    time.sleep(int(os.environ.get("EXAMPLE_BOOT_DELAY_MS", "0")) / 1000)
    server = ThreadingHTTPServer(("127.0.0.1", int(os.environ["PORT"])), Agent)
    server.daemon_threads = True
    print("example agent %s listening on 127.0.0.1:%s" % (os.environ.get("ROOST_INSTANCE_ID", "?"), os.environ["PORT"]), flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
