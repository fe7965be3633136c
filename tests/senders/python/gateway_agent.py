#!/usr/bin/env python3
"""A roost process runtime that calls models the way real agents do: with the official
`openai` and `anthropic` SDKs, pointed at roost's model gateway by the environment alone.

roost starts it with PORT, MODEL, AGENT_BRIEF, ROOST_INSTANCE_ID and the gateway's
OPENAI_BASE_URL, OPENAI_API_KEY, ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY (which the SDKs read
by themselves), and talks to it over HTTP on 127.0.0.1:$PORT:

  GET  /ready  -> 200
  POST /turn   {"turn_id": "...", "text": "..."} -> 200 {"reply": "..."}

No usage in the reply: the gateway sees every model call, so the runtime reports none.

The turn's first word is a command; every model call names os.environ["MODEL"]:

  env                    the environment, as JSON
  openai [prompt]        one chat completion (system AGENT_BRIEF, user prompt or "hello");
                         the reply is its text
  openai-stream [prompt] the same, streamed without stream_options; JSON
                         {"text", "usage_chunks": chunks with usage or without choices}
  openai-stream-usage [prompt]
                         streamed with stream_options.include_usage; JSON
                         {"text", "usage": the last chunk's usage as sent, or null}
  openai-tool            a get_weather round trip; JSON {"tool", "arguments", "reply"}
  openai-tool-stream     the same with both calls streamed
  anthropic [prompt]     one message (max_tokens 256); the reply is its text
  anthropic-stream [prompt]
                         the same, streamed with messages.stream()
  anthropic-tool         a get_weather round trip; JSON {"tool", "input", "reply"}
  many N                 N chat completions at once, one thread and client each; JSON
                         {"ok": successes, "errors": [status code, or exception class
                         when there is none, of each failure]}

Anything else is echoed as "[<brief>] <text>", with no model call. A failed call replies
"error: <status code or exception class>: <message>", never an HTTP error.
"""

import json
import os
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import anthropic
import openai

BRIEF = os.environ.get("AGENT_BRIEF", "")
TOOL_PROMPT = "What is the weather in Paris?"
TOOL_RESULT = "sunny, 24 C"
WEATHER_PARAMETERS = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}
OPENAI_WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather forecast for a city",
        "parameters": WEATHER_PARAMETERS,
    },
}
ANTHROPIC_WEATHER_TOOL = {
    "name": "get_weather",
    "description": "The weather forecast for a city",
    "input_schema": WEATHER_PARAMETERS,
}
# Enough threads for `many` to put real concurrency on the gateway, but bounded.
MAX_THREADS = 256


def model():
    return os.environ["MODEL"]


def openai_client():
    # Base URL and key come from OPENAI_BASE_URL / OPENAI_API_KEY; no retries, so the
    # gateway's answer is what the turn sees.
    return openai.OpenAI(max_retries=0)


def anthropic_client():
    return anthropic.Anthropic(max_retries=0)


def openai_messages(prompt):
    return [{"role": "system", "content": BRIEF}, {"role": "user", "content": prompt or "hello"}]


def openai_chat(prompt):
    completion = openai_client().chat.completions.create(model=model(), messages=openai_messages(prompt))
    return completion.choices[0].message.content


def openai_stream(messages, **options):
    """Streams one chat completion: its text, its tool calls by index ({id, name,
    arguments} put together from their pieces) and every chunk."""
    text, calls, chunks = [], {}, []
    for chunk in openai_client().chat.completions.create(model=model(), messages=messages, stream=True, **options):
        chunks.append(chunk)
        for choice in chunk.choices:
            delta = choice.delta
            if delta.content:
                text.append(delta.content)
            for piece in delta.tool_calls or []:
                call = calls.setdefault(piece.index, {"id": None, "name": "", "arguments": ""})
                if piece.id:
                    call["id"] = piece.id
                if piece.function and piece.function.name:
                    call["name"] += piece.function.name
                if piece.function and piece.function.arguments:
                    call["arguments"] += piece.function.arguments
    return "".join(text), [calls[index] for index in sorted(calls)], chunks


def openai_tool(streamed):
    client = openai_client()
    messages = [{"role": "system", "content": BRIEF}, {"role": "user", "content": TOOL_PROMPT}]

    def call(messages):
        if streamed:
            text, calls, _ = openai_stream(messages, tools=[OPENAI_WEATHER_TOOL])
            return text, calls
        message = client.chat.completions.create(
            model=model(), messages=messages, tools=[OPENAI_WEATHER_TOOL]
        ).choices[0].message
        calls = [
            {"id": c.id, "name": c.function.name, "arguments": c.function.arguments}
            for c in message.tool_calls or []
        ]
        return message.content, calls

    text, calls = call(messages)
    if not calls:
        raise RuntimeError("the model made no tool call: %r" % text)
    tool_call = calls[0]
    messages.append(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": tool_call["id"],
                    "type": "function",
                    "function": {"name": tool_call["name"], "arguments": tool_call["arguments"]},
                }
            ],
        }
    )
    messages.append({"role": "tool", "tool_call_id": tool_call["id"], "content": TOOL_RESULT})
    reply, _ = call(messages)
    return json.dumps({"tool": tool_call["name"], "arguments": tool_call["arguments"], "reply": reply})


def anthropic_options():
    return {"model": model(), "max_tokens": 256, **({"system": BRIEF} if BRIEF else {})}


def message_text(message):
    return "".join(block.text for block in message.content if block.type == "text")


def anthropic_message(prompt):
    messages = [{"role": "user", "content": prompt or "hello"}]
    return message_text(anthropic_client().messages.create(messages=messages, **anthropic_options()))


def anthropic_stream(prompt):
    messages = [{"role": "user", "content": prompt or "hello"}]
    with anthropic_client().messages.stream(messages=messages, **anthropic_options()) as stream:
        text = "".join(stream.text_stream)
        stream.get_final_message()
    return text


def anthropic_tool():
    client = anthropic_client()
    messages = [{"role": "user", "content": TOOL_PROMPT}]
    asked = client.messages.create(messages=messages, tools=[ANTHROPIC_WEATHER_TOOL], **anthropic_options())
    uses = [block for block in asked.content if block.type == "tool_use"]
    if not uses:
        raise RuntimeError("the model made no tool call: %r" % message_text(asked))
    use = uses[0]
    messages.append({"role": "assistant", "content": [block.to_dict() for block in asked.content]})
    messages.append(
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": TOOL_RESULT}]}
    )
    answered = client.messages.create(messages=messages, tools=[ANTHROPIC_WEATHER_TOOL], **anthropic_options())
    return json.dumps({"tool": use.name, "input": use.input, "reply": message_text(answered)})


def many(count):
    def one(_):
        try:
            openai_chat("hello")
            return None
        except openai.APIStatusError as err:
            return err.status_code
        except Exception as err:  # noqa: BLE001 - a failure to count, whatever it is
            return type(err).__name__

    if count <= 0:
        return json.dumps({"ok": 0, "errors": []})
    with ThreadPoolExecutor(max_workers=min(count, MAX_THREADS)) as pool:
        results = list(pool.map(one, range(count)))
    errors = [result for result in results if result is not None]
    return json.dumps({"ok": count - len(errors), "errors": errors})


def answer(text):
    command, _, rest = text.strip().partition(" ")
    rest = rest.strip()
    if command == "env":
        return json.dumps(dict(os.environ))
    if command == "openai":
        return openai_chat(rest)
    if command == "openai-stream":
        text, _, chunks = openai_stream(openai_messages(rest))
        usage_chunks = sum(1 for chunk in chunks if chunk.usage is not None or not chunk.choices)
        return json.dumps({"text": text, "usage_chunks": usage_chunks})
    if command == "openai-stream-usage":
        text, _, chunks = openai_stream(openai_messages(rest), stream_options={"include_usage": True})
        usage = chunks[-1].usage if chunks else None
        return json.dumps({"text": text, "usage": usage.model_dump(exclude_unset=True) if usage else None})
    if command == "openai-tool":
        return openai_tool(streamed=False)
    if command == "openai-tool-stream":
        return openai_tool(streamed=True)
    if command == "anthropic":
        return anthropic_message(rest)
    if command == "anthropic-stream":
        return anthropic_stream(rest)
    if command == "anthropic-tool":
        return anthropic_tool()
    if command == "many":
        return many(int(rest))
    return "[%s] %s" % (BRIEF, text)


def reply_to(text):
    try:
        return answer(text)
    except (openai.APIStatusError, anthropic.APIStatusError) as err:
        return "error: %d: %s" % (err.status_code, err.message)
    except Exception as err:  # noqa: BLE001 - the turn reports it; the runtime stays up
        return "error: %s: %s" % (type(err).__name__, err)


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
        if self.path != "/turn":
            self.send_json(404, {"error": "not found"})
            return
        length = int(self.headers.get("Content-Length", "0"))
        try:
            turn = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            self.send_json(400, {"error": "the turn is not JSON"})
            return
        self.send_json(200, {"reply": reply_to(str(turn.get("text", "")))})

    def log_message(self, fmt, *args):
        pass


def main():
    port = int(os.environ["PORT"])
    server = ThreadingHTTPServer(("127.0.0.1", port), Agent)
    server.daemon_threads = True
    print("gateway agent %s listening on 127.0.0.1:%d" % (os.environ.get("ROOST_INSTANCE_ID", "?"), port), flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
