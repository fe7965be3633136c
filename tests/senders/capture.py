"""A developer tool, not used by the tests: records what the drivers really send, for
CAPTURED.md. Run with the senders venv's python (it needs opentelemetry-proto):

    target/senders-venv/bin/python tests/senders/capture.py run OUT_DIR

starts an OTLP/HTTP capture endpoint and a fake OpenAI server (answering as
tests/src/fake_openai.rs does), runs every driver against them, and writes
OUT_DIR/<driver>.jsonl (one OTLP request a line, as OTLP/JSON) plus OUT_DIR/<driver>.txt,
a readable inventory of spans, span events, log records and metrics with every attribute.
`summarize FILE.jsonl` prints the inventory of one capture.
"""

import gzip
import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2 as logs
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2 as metrics
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2 as traces

HERE = Path(__file__).resolve().parent
KINDS = {
    "/v1/traces": (traces.ExportTraceServiceRequest, traces.ExportTraceServiceResponse),
    "/v1/logs": (logs.ExportLogsServiceRequest, logs.ExportLogsServiceResponse),
    "/v1/metrics": (metrics.ExportMetricsServiceRequest, metrics.ExportMetricsServiceResponse),
}
DRIVERS = {
    "openai_v2": ["python", "python/openai_v2.py"],
    "openllmetry": ["python", "python/openllmetry.py"],
    "open_inference": ["python", "python/open_inference.py"],
    "vercel_ai": ["node", "node/vercel_ai.mjs"],
}
# Mirrors tests/src/fake_openai.rs.
MODEL = "gpt-4o-mini-2024-07-18"
USAGE = {"prompt_tokens": 21, "completion_tokens": 7, "total_tokens": 28, "prompt_tokens_details": {"cached_tokens": 5}}
REPLY = "The capital of France is Paris."
REPLY_AFTER_TOOL = "It is sunny and 24 C in Paris."


def read_body(handler):
    if handler.headers.get("transfer-encoding") == "chunked":
        body = b""
        while True:
            size = int(handler.rfile.readline().strip(), 16)
            chunk = handler.rfile.read(size)
            handler.rfile.readline()
            if size == 0:
                return body
            body += chunk
    body = handler.rfile.read(int(handler.headers["content-length"]))
    return gzip.decompress(body) if handler.headers.get("content-encoding") == "gzip" else body


def answer(handler, content_type, body):
    handler.send_response(200)
    handler.send_header("content-type", content_type)
    handler.send_header("content-length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


class Capture(BaseHTTPRequestHandler):
    out = None
    lock = threading.Lock()

    def do_POST(self):
        body = read_body(self)
        request_type, response_type = KINDS[self.path]
        if self.headers.get("content-type", "").startswith("application/json"):
            decoded = json.loads(body)
        else:
            message = request_type()
            message.ParseFromString(body)
            decoded = MessageToDict(message)
        with self.lock, open(self.out, "a") as f:
            f.write(json.dumps({"path": self.path, "content_type": self.headers.get("content-type"), "body": decoded}) + "\n")
        answer(self, "application/x-protobuf", response_type().SerializeToString())

    def log_message(self, *args):
        pass


class FakeOpenAI(BaseHTTPRequestHandler):
    calls = 0

    def do_POST(self):
        request = json.loads(read_body(self))
        FakeOpenAI.calls += 1
        messages = request.get("messages", [])
        if request.get("tools") and not any(m.get("role") == "tool" for m in messages):
            call = {"id": "call_roost_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}
            message, finish = {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"
        else:
            text = REPLY_AFTER_TOOL if any(m.get("role") == "tool" for m in messages) else REPLY
            message, finish = {"role": "assistant", "content": text}, "stop"
        response = {
            "id": f"chatcmpl-roost-{FakeOpenAI.calls}",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": MODEL,
            "system_fingerprint": "fp_roost",
            "service_tier": "default",
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "usage": USAGE,
        }
        answer(self, "application/json", json.dumps(response).encode())

    def log_message(self, *args):
        pass


def serve(handler):
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}"


def value(v):
    if not v:
        return None
    kind, x = next(iter(v.items()))
    if kind == "arrayValue":
        return [value(i) for i in x.get("values", [])]
    if kind == "kvlistValue":
        return {kv["key"]: value(kv.get("value")) for kv in x.get("values", [])}
    return int(x) if kind == "intValue" else x


def attributes(kvs):
    return {kv["key"]: value(kv.get("value")) for kv in kvs or []}


def show(x):
    return json.dumps(x, ensure_ascii=False)


def summarize(path):
    lines = []
    p = lines.append
    for line in open(path):
        request = json.loads(line)
        body = request["body"]
        p(f"# POST {request['path']} ({request['content_type']})")
        for rs in body.get("resourceSpans", []):
            p(f"resource {show(attributes(rs['resource'].get('attributes')))}")
            for ss in rs.get("scopeSpans", []):
                p(f" scope {show(ss.get('scope'))}")
                for s in ss.get("spans", []):
                    parent = "parent=" + s["parentSpanId"] if s.get("parentSpanId") else "root"
                    p(f"  SPAN {s['name']!r} kind={s.get('kind')} status={show(s.get('status'))} trace={s['traceId']} {parent}")
                    for k, v in attributes(s.get("attributes")).items():
                        p(f"    {k} = {show(v)}")
                    for e in s.get("events", []):
                        p(f"    EVENT {e['name']!r} {show(attributes(e.get('attributes')))}")
        for rl in body.get("resourceLogs", []):
            p(f"resource {show(attributes(rl['resource'].get('attributes')))}")
            for sl in rl.get("scopeLogs", []):
                p(f" scope {show(sl.get('scope'))}")
                for r in sl.get("logRecords", []):
                    times = {k: r[k] for k in ("timeUnixNano", "observedTimeUnixNano") if k in r}
                    p(f"  LOG event_name={r.get('eventName')!r} severity={r.get('severityNumber')} {show(times)} trace={r.get('traceId')}")
                    for k, v in attributes(r.get("attributes")).items():
                        p(f"    attribute {k} = {show(v)}")
                    p(f"    body = {show(value(r.get('body')))}")
        for rm in body.get("resourceMetrics", []):
            p(f"resource {show(attributes(rm['resource'].get('attributes')))}")
            for sm in rm.get("scopeMetrics", []):
                p(f" scope {show(sm.get('scope'))}")
                for m in sm.get("metrics", []):
                    kind = next(k for k in m if k not in ("name", "unit", "description", "metadata"))
                    temporality = m[kind].get("aggregationTemporality", "")
                    p(f"  METRIC {m['name']} {kind} {temporality} unit={m.get('unit')!r}")
                    for dp in m[kind].get("dataPoints", []):
                        v = {k: dp[k] for k in ("asInt", "asDouble", "count", "sum") if k in dp}
                        p(f"    point {show(v)} {show(attributes(dp.get('attributes')))}")
    return "\n".join(lines) + "\n"


def run(out_dir):
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    otlp, openai = serve(Capture), serve(FakeOpenAI)
    python = str(Path(sys.executable))
    for name, (runtime, script) in DRIVERS.items():
        Capture.out = out_dir / f"{name}.jsonl"
        Capture.out.write_text("")
        program = python if runtime == "python" else "node"
        env = dict(os.environ, OPENAI_BASE_URL=f"{openai}/v1", OTEL_EXPORTER_OTLP_ENDPOINT=otlp)
        subprocess.run([program, str(HERE / script)], env=env, check=True, cwd=HERE / runtime)
        (out_dir / f"{name}.txt").write_text(summarize(Capture.out))
        print(f"{name}: {out_dir / (name + '.txt')}")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "run":
        run(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "summarize":
        sys.stdout.write(summarize(sys.argv[2]))
    else:
        sys.exit(__doc__)
