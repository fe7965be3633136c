#!/usr/bin/env python3
"""A hostile process runtime (stdlib only), for roost's sandbox tests.

It serves roost's process contract (GET /ready, POST /turn on $PORT) and, on a turn, does
what the turn's JSON asks and replies with what happened, as JSON:

  {"probe": {...targets...}}   tries every escape the sandbox must stop, each reported as
                               "blocked: <why>" or "REACHED: <what it got>"
  {"model": "hello"}           one chat completion through roost's model gateway, with
                               the variables the OpenAI SDK reads
  {"egress": "http://h:p/x"}   one GET through the egress proxy ($HTTP_PROXY), by hand
  {"fork": n}                  forks up to n sleeping children; reports how many it got
  {"allocate_mb": n}           allocates and touches n MiB (past its limit: the kernel
                               kills it)
  {"model_bench": n}           n model calls one after another on one keep-alive
                               connection; each one's duration in microseconds (the
                               sandbox benchmark)
  {"token": true}              its own gateway token (to try it elsewhere)
  {"model_with_token": t}      one chat completion presenting token t instead of its own
  {"plant": true}              makes `owned.txt` and a setuid, setgid `setuid-probe` in its
                               workspace; their mode as it sees it
  {"nest": {"under": p, "depth": n}}
                               n nested directories under p, made one level at a time
  {"fill_mb": n}               writes up to n MiB into `fill.bin` in its workspace; how
                               much went in and the error that stopped it
  {"files": true}              shapes its workspace as a tenant attacking the files API
                               would: memory files, a folder, links out (to /etc/passwd,
                               to `..`, to `/`), a FIFO, a 3 MiB file, an HTML page
  {"swap": seconds}            for that long, in the background, swaps `swap.txt` between
                               a file and a link to /etc/shadow as fast as it can
  {"burn": {"cpus": n, "processes": m}}
                               n busy loops and m sleeping processes, until it stops

On SIGTERM it writes `stopped-by-sigterm` in its workspace and exits: a graceful stop
reaches it through the sandbox's relay.
"""

import ctypes
import errno
import json
import os
import signal
import socket
import sys
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, HTTPServer


def outcome(attempt):
    """Runs `attempt`; what it got if it worked, why not if it did not."""
    try:
        got = attempt()
        return "REACHED: " + str(got)[:200]
    except Exception as err:  # every failure is the expected outcome here
        return "blocked: " + type(err).__name__ + ": " + str(err)[:200]


def read(path):
    with open(path, "rb") as f:
        return f.read(64)


def connect(host, port):
    with socket.create_connection((host, port), timeout=3) as s:
        return "connected to %s:%d" % (host, port)


def http_get(url, proxy=None, timeout=5):
    handlers = [urllib.request.ProxyHandler({"http": proxy, "https": proxy} if proxy else {})]
    opener = urllib.request.build_opener(*handlers)
    with opener.open(url, timeout=timeout) as resp:
        return "%d %s" % (resp.status, resp.read(200))


def connect_via_proxy(host, port):
    """CONNECT host:port through the egress proxy; the proxy's status line."""
    proxy = os.environ["HTTP_PROXY"].split("//", 1)[1]
    phost, pport = proxy.rsplit(":", 1)
    with socket.create_connection((phost, int(pport)), timeout=5) as s:
        s.sendall(("CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (host, port, host, port)).encode())
        line = s.recv(200).split(b"\r\n", 1)[0].decode()
    if " 200 " in line + " ":
        return line
    raise PermissionError(line)


def get_via_proxy(url):
    """GET `url` through the egress proxy, in absolute form (urllib would skip the proxy
    for hosts in NO_PROXY, and the allowed test server is on 127.0.0.1)."""
    proxy = os.environ["HTTP_PROXY"].split("//", 1)[1]
    phost, pport = proxy.rsplit(":", 1)
    host = url.split("//", 1)[1].split("/", 1)[0]
    with socket.create_connection((phost, int(pport)), timeout=5) as s:
        s.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (url, host)).encode())
        answer = b""
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            answer += chunk
    if not answer.startswith(b"HTTP/1.1 200"):
        raise PermissionError(answer[:200].decode(errors="replace"))
    return answer.decode(errors="replace")


def other_processes():
    """The processes it can see that are not its sandbox's (the relay, itself, its kids)."""
    seen = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open("/proc/%s/cmdline" % entry, "rb") as f:
                    seen.append(f.read().replace(b"\0", b" ").decode(errors="replace").strip())
            except OSError:
                pass
    foreign = [c for c in seen if "sandbox-relay" not in c and "hostile_agent" not in c]
    if foreign:
        return foreign
    raise PermissionError("sees only its sandbox: %d processes" % len(seen))


def write(path):
    with open(path, "w") as f:
        f.write("x")
    return "wrote " + path


def syscall_refused(name, *args):
    libc = ctypes.CDLL(None, use_errno=True)
    if getattr(libc, name)(*args) == 0:
        return name + " succeeded"
    raise PermissionError("%s: %s" % (name, os.strerror(ctypes.get_errno())))


def socket_refused(family, kind):
    s = socket.socket(family, kind, 0)
    s.close()
    return "socket(%d, %d) made" % (family, kind)


def io_uring_refused():
    libc = ctypes.CDLL(None, use_errno=True)
    params = ctypes.create_string_buffer(120)
    fd = libc.syscall(425, 1, params)
    if fd >= 0:
        os.close(fd)
        return "io_uring_setup made an instance"
    raise PermissionError("io_uring_setup: %s" % os.strerror(ctypes.get_errno()))


def write_proc(path):
    with open(path, "w") as f:
        f.write("")
    return "opened " + path + " for writing"


def directory_fds():
    """Directories open in its own process or the relay's (pid 1, same uid, so readable
    through /proc/1/fd): a descriptor of a host directory would be a way out of the
    sandbox's mounts (openat(fd, "..")). None may be there."""
    found = []
    for pid in ("self", "1"):
        base = "/proc/%s/fd" % pid
        for name in os.listdir(base):
            path = os.path.join(base, name)
            try:
                target = os.readlink(path)
                listing = target.startswith("/proc/") and target.endswith("/fd")
                if os.path.isdir(path) and not listing:
                    found.append("%s/%s -> %s" % (pid, name, target))
            except OSError:
                pass
    if found:
        return found
    raise PermissionError("no directory descriptors")


def status_field(name):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(name + ":"):
                return line.split(":", 1)[1].strip()
    return ""


def probe(t):
    checks = {
        "secret_key": lambda: read(t["secret_key"]),
        "database": lambda: read(t["database"]),
        "other_workspace": lambda: os.listdir(t["other_workspace"]),
        "other_workspace_file": lambda: read(os.path.join(t["other_workspace"], "notes.md")),
        "home": lambda: os.listdir("/home") + os.listdir("/root"),
        "shadow": lambda: read("/etc/shadow"),
        "processes": other_processes,
        "roost_listener": lambda: connect("127.0.0.1", t["roost_port"]),
        "roost_query": lambda: http_get("http://127.0.0.1:%d/api/local/query" % t["roost_port"]),
        "dashboard_via_gateway": lambda: http_get(os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] + "/api/local/query"),
        "postgres": lambda: connect("127.0.0.1", 5432),
        "metadata_direct": lambda: connect("169.254.169.254", 80),
        "metadata_via_proxy": lambda: http_get("http://169.254.169.254/latest/meta-data/", os.environ["HTTP_PROXY"]),
        "private_via_proxy": lambda: connect_via_proxy("10.0.0.1", 443),
        "loopback_via_proxy": lambda: connect_via_proxy("127.0.0.1", t["roost_port"]),
        "localhost_via_proxy": lambda: connect_via_proxy("localhost", t["roost_port"]),
        "write_usr": lambda: write("/usr/roost-was-here"),
        "write_root": lambda: write("/roost-was-here"),
        "write_runtimes": lambda: write(os.path.join(os.path.dirname(os.path.abspath(__file__)), "x")),
        "unshare_user": lambda: syscall_refused("unshare", 0x10000000),
        "ptrace": lambda: syscall_refused("ptrace", 0, 0, 0, 0),
        "mount": lambda: syscall_refused("mount", b"none", b"/tmp", b"tmpfs", 0, None),
        "proc_sys_write": lambda: write_proc("/proc/sys/kernel/core_pattern"),
        "proc_sysrq_write": lambda: write_proc("/proc/sysrq-trigger"),
        "io_uring": io_uring_refused,
        "socket_vsock": lambda: socket_refused(40, socket.SOCK_STREAM),
        "socket_netlink": lambda: socket_refused(16, socket.SOCK_RAW),
        "socket_packet": lambda: socket_refused(17, socket.SOCK_RAW),
        # The sockets roost serves it and reaches it through: nothing to swap or plant.
        "swap_gateway_socket": lambda: os.unlink("/run/roost/gateway.sock") or "unlinked the gateway socket",
        "plant_agent_socket": lambda: os.symlink("/run/roost/gateway.sock", "/run/roost/agent.sock") or "planted",
        "plant_old_agent_socket": lambda: os.makedirs("/run/roost/agent", exist_ok=True) or "made /run/roost/agent",
        "directory_fds": directory_fds,
    }
    report = {name: outcome(check) for name, check in checks.items()}
    # What must hold inside, reported as is.
    report["no_new_privs"] = status_field("NoNewPrivs")
    report["capabilities"] = status_field("CapEff")
    report["seccomp"] = status_field("Seccomp")
    report["workspace_writable"] = outcome(lambda: write(os.path.join(os.environ["ROOST_WORKSPACE"], "probe.txt")))
    report["tmp_writable"] = outcome(lambda: write("/tmp/probe.txt"))
    return report


def model(text):
    """One chat completion the way the OpenAI SDK makes it: OPENAI_BASE_URL, OPENAI_API_KEY."""
    body = json.dumps({"model": os.environ.get("MODEL", ""), "messages": [{"role": "user", "content": text}]})
    req = urllib.request.Request(
        os.environ["OPENAI_BASE_URL"] + "/chat/completions",
        data=body.encode(),
        headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"], "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=20) as resp:
        return json.loads(resp.read())["choices"][0]["message"]["content"]


def model_bench(n):
    import http.client

    base = os.environ["OPENAI_BASE_URL"].split("//", 1)[1]
    host, path = base.split("/", 1)
    conn = http.client.HTTPConnection(host, timeout=20)
    body = json.dumps({"model": os.environ.get("MODEL", ""), "messages": [{"role": "user", "content": "hi"}]})
    headers = {"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"], "Content-Type": "application/json"}
    took = []
    for _ in range(n):
        started = time.perf_counter()
        conn.request("POST", "/" + path + "/chat/completions", body, headers)
        resp = conn.getresponse()
        resp.read()
        took.append(int((time.perf_counter() - started) * 1e6))
        if resp.status != 200:
            raise RuntimeError("model call answered %d" % resp.status)
    return took


def plant():
    ws = os.environ["ROOST_WORKSPACE"]
    with open(os.path.join(ws, "owned.txt"), "w") as f:
        f.write("mine")
    probe_path = os.path.join(ws, "setuid-probe")
    with open(probe_path, "w") as f:
        f.write("#!/bin/sh\nid -u\n")
    os.chmod(probe_path, 0o6755)
    return {"uid": os.getuid(), "mode": oct(os.stat(probe_path).st_mode)}


def shape_files():
    ws = os.environ["ROOST_WORKSPACE"]
    def put(rel, text):
        path = os.path.join(ws, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
    put("SOUL.md", "# Soul\nI am **hostile**.")
    put("MEMORY.md", "- the user likes tea")
    put(".hermes/memories/USER.md", "name: Ada")
    put("notes/plan.md", "step 1 <script>alert(1)</script>")
    put("page.html", "<script>alert(document.cookie)</script>")
    for name, target in [("passwd", "/etc/passwd"), ("up", ".."), ("root", "/")]:
        os.symlink(target, os.path.join(ws, name))
    os.mkfifo(os.path.join(ws, "pipe"))
    with open(os.path.join(ws, "big.bin"), "wb") as f:
        f.truncate(3 * 1024 * 1024)
    return sorted(os.listdir(ws))


def swap(seconds):
    """Swaps swap.txt between a file and a link to /etc/shadow until `seconds` pass."""
    import threading
    ws = os.environ["ROOST_WORKSPACE"]
    path = os.path.join(ws, "swap.txt")
    with open(path, "w") as f:
        f.write("plain")

    def run():
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            for make in (lambda p: os.symlink("/etc/shadow", p), lambda p: open(p, "w").write("plain")):
                tmp = path + ".tmp"
                try:
                    os.unlink(tmp)
                except FileNotFoundError:
                    pass
                make(tmp)
                os.rename(tmp, path)

    threading.Thread(target=run, daemon=True).start()
    return "swapping"


def nest(under, depth):
    """`depth` directories, each inside the last, made relative to the last (no path ever
    grows): how deep it got, and what stopped it."""
    fd = os.open(under, os.O_RDONLY | os.O_DIRECTORY)
    made = 0
    stopped = None
    try:
        for _ in range(depth):
            try:
                os.mkdir("d", dir_fd=fd)
                inner = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            except OSError as err:
                stopped = errno.errorcode.get(err.errno, str(err.errno))
                break
            os.close(fd)
            fd = inner
            made += 1
    finally:
        os.close(fd)
    return {"made": made, "stopped": stopped}


def fill(mb):
    path = os.path.join(os.environ["ROOST_WORKSPACE"], "fill.bin")
    chunk = b"\xa5" * (1024 * 1024)
    written = 0
    stopped = None
    with open(path, "wb", buffering=0) as f:
        try:
            for _ in range(mb):
                f.write(chunk)
                written += 1
            os.fsync(f.fileno())
        except OSError as err:
            stopped = errno.errorcode.get(err.errno, str(err.errno))
    return {"written_mb": written, "stopped": stopped}


def burn(cpus, processes):
    """Busy loops and sleepers that live until the agent stops: the CPU benchmark's load."""
    started = 0
    for i in range(cpus + processes):
        try:
            pid = os.fork()
        except OSError:
            break
        if pid == 0:
            if i < cpus:
                while True:
                    pass
            time.sleep(100000)
            os._exit(0)
        started += 1
    return started


def model_with_token(token):
    body = json.dumps({"model": os.environ.get("MODEL", ""), "messages": [{"role": "user", "content": "hi"}]})
    req = urllib.request.Request(
        os.environ["OPENAI_BASE_URL"] + "/chat/completions",
        data=body.encode(),
        headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=20) as resp:
            return "REACHED: %d" % resp.status
    except urllib.error.HTTPError as err:
        return "blocked: HTTP %d %s" % (err.code, err.read(200).decode(errors="replace"))


def fork(n):
    got = 0
    kids = []
    for _ in range(n):
        try:
            pid = os.fork()
        except OSError as err:
            if err.errno in (errno.EAGAIN, errno.ENOMEM):
                break
            raise
        if pid == 0:
            time.sleep(2)
            os._exit(0)
        kids.append(pid)
        got += 1
    for pid in kids:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    return got


def allocate(mb):
    chunks = []
    for _ in range(mb):
        chunks.append(bytearray(1024 * 1024))
    return "allocated %d MiB" % len(chunks)


class Handler(BaseHTTPRequestHandler):
    # The headers and the body are two writes: without TCP_NODELAY the body waits for
    # the client's delayed ACK of the headers (~40 ms a turn).
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
        length = int(self.headers.get("Content-Length", "0"))
        ask = json.loads(json.loads(self.rfile.read(length))["text"])
        if "probe" in ask:
            result = probe(ask["probe"])
        elif "model" in ask:
            result = outcome(lambda: model(ask["model"]))
        elif "egress" in ask:
            result = outcome(lambda: get_via_proxy(ask["egress"]))
        elif "model_bench" in ask:
            result = model_bench(ask["model_bench"])
        elif "fork" in ask:
            result = fork(ask["fork"])
        elif "allocate_mb" in ask:
            result = allocate(ask["allocate_mb"])
        elif "token" in ask:
            result = os.environ["OPENAI_API_KEY"]
        elif "model_with_token" in ask:
            result = model_with_token(ask["model_with_token"])
        elif "plant" in ask:
            result = plant()
        elif "nest" in ask:
            result = nest(ask["nest"]["under"], ask["nest"]["depth"])
        elif "fill_mb" in ask:
            result = fill(ask["fill_mb"])
        elif "files" in ask:
            result = shape_files()
        elif "swap" in ask:
            result = swap(ask["swap"])
        elif "burn" in ask:
            result = burn(ask["burn"]["cpus"], ask["burn"]["processes"])
        else:
            result = "unknown ask"
        self.reply(200, {"reply": json.dumps(result)})


def stopped(*_):
    """A graceful stop reached it (through the sandbox's relay): say so where roost sees it."""
    with open(os.path.join(os.environ["ROOST_WORKSPACE"], "stopped-by-sigterm"), "w") as f:
        f.write("SIGTERM")
    os._exit(0)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, stopped)
    print("hostile agent up", file=sys.stderr, flush=True)
    HTTPServer(("127.0.0.1", int(os.environ["PORT"])), Handler).serve_forever()
