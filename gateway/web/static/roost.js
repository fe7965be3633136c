// roost's page script. Pages are complete without it (read-only, times in UTC); with it,
// times show in the browser's zone, forms marked data-confirm ask first, the chat shows
// its progress and streams its reply, copy buttons copy, the live pages
// stream (EventSource), and the usage page draws its charts (vendored uPlot).
// No inline script anywhere: the CSP allows only files served by roost.
"use strict";

(function () {
  const timeFormat = new Intl.DateTimeFormat(undefined, {
    year: "numeric", month: "short", day: "numeric",
    hour: "2-digit", minute: "2-digit", second: "2-digit",
  });

  function localTime(iso) {
    const date = new Date(iso);
    return isNaN(date.getTime()) ? iso : timeFormat.format(date);
  }

  function localiseTimes(root) {
    root.querySelectorAll("time[datetime]").forEach(function (el) {
      el.title = el.getAttribute("datetime");
      el.textContent = localTime(el.getAttribute("datetime"));
    });
  }

  function confirmForms() {
    document.querySelectorAll("form[data-confirm]").forEach(function (form) {
      form.addEventListener("submit", function (event) {
        if (!window.confirm(form.getAttribute("data-confirm"))) event.preventDefault();
      });
    });
  }

  // A form marked data-progress (the agent chat) waits for a slow answer: while the
  // browser waits, its button is disabled and the named element counts the seconds.
  function progressForms() {
    document.querySelectorAll("form[data-progress]").forEach(function (form) {
      form.addEventListener("submit", function () {
        const out = document.getElementById(form.getAttribute("data-progress"));
        const button = form.querySelector("button[type=submit]");
        const started = Date.now();
        if (button) button.disabled = true;
        if (!out) return;
        out.hidden = false;
        const tick = function () {
          out.textContent = "Waiting for the agent… " + Math.floor((Date.now() - started) / 1000) + " s";
        };
        tick();
        const timer = window.setInterval(tick, 1000);
        // The streamed chat says when the wait is over without leaving the page.
        form.addEventListener("roost:idle", function () {
          window.clearInterval(timer);
          out.hidden = true;
          if (button) button.disabled = false;
        }, { once: true });
      });
    });
  }

  // The chat (a form marked data-chat, naming the conversation) streams its turn: the
  // post asks for text/event-stream, the reply's text grows in a new message as the agent
  // writes it and each tool step shows as a line, then the page reloads on the finished
  // turn, which the server renders (markdown, cost, tokens, time). A refusal before the
  // turn starts sends the form the plain way, so its error page shows as without script.
  function streamingChats() {
    if (!window.fetch || !window.TextDecoder || !window.ReadableStream) return;
    document.querySelectorAll("form[data-chat]").forEach(function (form) {
      const conversation = document.getElementById(form.getAttribute("data-chat"));
      if (!conversation) return;
      form.addEventListener("submit", function (event) {
        if (form.getAttribute("data-plain") === "1") return;
        event.preventDefault();
        const body = new URLSearchParams(new FormData(form));
        const text = String(body.get("text") || "");
        fetch(form.action, {
          method: "POST",
          body: body,
          credentials: "same-origin",
          headers: { "Accept": "text/event-stream" },
        }).then(function (response) {
          const type = response.headers.get("content-type") || "";
          if (!response.ok || type.indexOf("text/event-stream") !== 0 || !response.body) {
            form.setAttribute("data-plain", "1");
            form.submit();
            return;
          }
          readTurn(response.body.getReader(), conversation, text, form);
        }).catch(function () {
          form.setAttribute("data-plain", "1");
          form.submit();
        });
      });
    });
  }

  function message(conversation, kind, role) {
    const div = document.createElement("div");
    div.className = "msg " + kind;
    const header = document.createElement("header");
    const span = document.createElement("span");
    span.className = "role";
    span.textContent = role;
    header.appendChild(span);
    const text = document.createElement("div");
    text.className = "text";
    div.appendChild(header);
    div.appendChild(text);
    conversation.appendChild(div);
    return text;
  }

  function readTurn(reader, conversation, sent, form) {
    message(conversation, "user", "you").textContent = sent;
    let reply = null;
    const steps = {};
    const decoder = new TextDecoder();
    let buffer = "";
    let ended = false;
    const handle = function (name, data) {
      let value;
      try { value = JSON.parse(data); } catch (e) { return; }
      if (name === "delta") {
        if (!reply) {
          reply = message(conversation, "assistant", "agent");
          reply.classList.add("reply", "streaming");
          reply.setAttribute("aria-live", "polite");
        }
        reply.appendChild(document.createTextNode(value.text || ""));
      } else if (name === "tool") {
        let line = steps[value.id];
        if (!line) {
          line = message(conversation, "tool", "tool");
          line.classList.add("mono");
          steps[value.id] = line;
        }
        line.textContent = value.finished
          ? value.name + " " + (value.arguments || "") + " — done in " + (value.duration_ms || 0) + " ms"
          : value.name + " " + (value.arguments || "") + " — running…";
      } else if (name === "done") {
        ended = true;
        const base = form.action.replace(/\/message$/, "");
        window.location.replace(base + "?turn=" + encodeURIComponent(value.turn_id) + "#turn-" + value.turn_id);
      } else if (name === "error") {
        message(conversation, "system", "no reply").textContent = value.error || "the turn failed";
        ended = true;
        form.dispatchEvent(new Event("roost:idle"));
      }
    };
    const pump = function () {
      reader.read().then(function (chunk) {
        if (chunk.done) {
          // Closed without done or error: roost stopped or the network dropped.
          if (!ended) {
            message(conversation, "system", "no reply").textContent =
              "The connection closed before the turn ended; reload to see how it went.";
            form.dispatchEvent(new Event("roost:idle"));
          }
          return;
        }
        buffer += decoder.decode(chunk.value, { stream: true });
        let end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          let name = "message";
          const data = [];
          block.split("\n").forEach(function (line) {
            if (line.indexOf("event:") === 0) name = line.slice(6).trim();
            else if (line.indexOf("data:") === 0) data.push(line.slice(5).replace(/^ /, ""));
          });
          if (data.length) handle(name, data.join("\n"));
        }
        pump();
      });
    };
    pump();
  }

  // A button marked data-copy copies the text of the element it names.
  function copyButtons() {
    document.querySelectorAll("button[data-copy]").forEach(function (button) {
      button.hidden = false;
      button.addEventListener("click", function () {
        const source = document.getElementById(button.getAttribute("data-copy"));
        if (!source || !navigator.clipboard) return;
        navigator.clipboard.writeText(source.textContent.trim()).then(function () {
          button.textContent = "Copied";
        });
      });
    });
  }

  // A protobuf Timestamp as the JSON API sends it: an RFC 3339 string, or {seconds, nanos}.
  function isoOf(value) {
    if (!value) return "";
    if (typeof value === "string") return value;
    if (typeof value === "object" && value.seconds !== undefined) {
      return new Date(Number(value.seconds) * 1000 + Math.floor((value.nanos || 0) / 1e6)).toISOString();
    }
    return "";
  }

  function cell(row, text, className) {
    const td = document.createElement("td");
    if (className) td.className = className;
    td.textContent = text === undefined || text === null ? "" : String(text);
    row.appendChild(td);
    return td;
  }

  function timeCell(row, value) {
    const td = document.createElement("td");
    const iso = isoOf(value);
    if (iso) {
      const t = document.createElement("time");
      t.setAttribute("datetime", iso);
      t.title = iso;
      t.textContent = localTime(iso);
      td.appendChild(t);
    }
    row.appendChild(td);
  }

  function linkCell(row, text, href) {
    const td = document.createElement("td");
    if (text) {
      const a = document.createElement("a");
      a.href = href;
      a.textContent = text;
      td.appendChild(a);
    }
    row.appendChild(td);
  }

  // Tokens as the pages write them (format.rs `tokens`): 9,999, 12.3k, 4.56M, 1.20B.
  function tokens(n) {
    const abs = Math.abs(n);
    const sign = n < 0 ? "-" : "";
    if (abs < 10000) return n.toLocaleString("en-US");
    if (abs < 1e6) return sign + (abs / 1e3).toFixed(1) + "k";
    if (abs < 1e9) return sign + (abs / 1e6).toFixed(2) + "M";
    return sign + (abs / 1e9).toFixed(2) + "B";
  }

  // A brain item's detail as the server renders the page's first rows (live.rs
  // `brain_detail`; keep the two in step): why it failed, tokens and cost, and an event's
  // or turn's data. A span's raw attributes stay on the trace page.
  function brainDetail(item) {
    const parts = [];
    if (item.status === "error") parts.push(item.status_message ? "error: " + item.status_message : "error");
    const used = Number(item.input_tokens || 0) + Number(item.output_tokens || 0);
    if (used > 0) {
      parts.push(tokens(used) + " tokens");
      if (Number(item.cost_usd) > 0) parts.push(usd(Number(item.cost_usd)));
    }
    if (item.kind !== "span" && item.detail) parts.push(item.detail);
    return parts.join(" · ");
  }

  // Renderers of one stream item into a table row, by feed kind.
  const renderers = {
    brain: function (item) {
      const tr = document.createElement("tr");
      if (item.status === "error") tr.className = "error";
      timeCell(tr, item.time);
      cell(tr, item.kind);
      cell(tr, item.service);
      cell(tr, item.title);
      cell(tr, item.model || "");
      linkCell(tr, item.session_id, "/dashboard/sessions/" + encodeURIComponent(item.session_id || ""));
      cell(tr, brainDetail(item), "detail-text");
      return tr;
    },
    logs: function (item) {
      const tr = document.createElement("tr");
      timeCell(tr, item.time);
      cell(tr, item.level, "level-" + item.level);
      cell(tr, item.source);
      cell(tr, item.service);
      cell(tr, item.message, "detail-text");
      if (item.trace_id) linkCell(tr, "trace", "/dashboard/traces/" + encodeURIComponent(item.trace_id));
      else cell(tr, "");
      return tr;
    },
  };

  // A live feed: a table whose tbody receives one row per event, newest on top, at most
  // data-max rows. Pause closes the stream; resume reopens it after the last id seen, so
  // nothing the server still buffers is missed. EventSource itself resends Last-Event-ID
  // when it reconnects after a network error.
  function liveFeed(root) {
    const source = root.getAttribute("data-stream");
    const kind = root.getAttribute("data-kind");
    const max = Number(root.getAttribute("data-max")) || 200;
    const body = root.querySelector("tbody");
    const state = root.querySelector(".feed-state");
    const toggle = root.querySelector("button.pause");
    const empty = root.querySelector(".feed-empty");
    const table = root.querySelector(".scroll");
    const render = renderers[kind];
    let lastId = "";
    let stream = null;
    let paused = false;

    function setState(text, down) {
      state.textContent = text;
      state.classList.toggle("down", Boolean(down));
    }

    function open() {
      const url = new URL(source, window.location.href);
      if (lastId) url.searchParams.set("last_event_id", lastId);
      stream = new EventSource(url.toString());
      setState("Connecting…");
      stream.onopen = function () { setState("Live"); };
      stream.onmessage = function (event) {
        lastId = event.lastEventId || lastId;
        let item;
        try { item = JSON.parse(event.data); } catch (_) { return; }
        const row = render(item);
        row.classList.add("fresh");
        body.insertBefore(row, body.firstChild);
        while (body.rows.length > max) body.deleteRow(body.rows.length - 1);
        if (empty) empty.hidden = true;
        if (table) table.hidden = false;
        root.setAttribute("data-count", String(Number(root.getAttribute("data-count") || 0) + 1));
      };
      stream.addEventListener("lagged", function (event) {
        lastId = event.lastEventId || lastId;
        let skipped = "?";
        try { skipped = JSON.parse(event.data).skipped; } catch (_) { /* keep "?" */ }
        setState("Live (skipped " + skipped + " items while this page fell behind)");
      });
      stream.onerror = function () {
        if (stream.readyState === EventSource.CLOSED) {
          setState("Disconnected. The stream was refused or roost stopped.", true);
          toggle.textContent = "Reconnect";
          paused = true;
          stream = null;
        } else {
          setState("Reconnecting…", true);
        }
      };
    }

    toggle.addEventListener("click", function () {
      if (paused) {
        paused = false;
        toggle.textContent = "Pause";
        open();
      } else {
        paused = true;
        toggle.textContent = "Resume";
        if (stream) stream.close();
        stream = null;
        setState("Paused");
      }
    });
    toggle.hidden = false;
    open();
  }

  // Dollars by the pages' rule (format.rs `usd`): cents from a cent up, two significant
  // digits below, so a chart's values read like the tables beside it.
  function usd(v) {
    if (!v || !isFinite(v)) return "$0";
    const abs = Math.abs(v);
    const sign = v < 0 ? "-" : "";
    if (abs >= 0.01) return sign + "$" + abs.toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 2 });
    const decimals = Math.min(11, Math.ceil(-Math.log10(abs)) + 1);
    return sign + "$" + abs.toFixed(decimals).replace(/0+$/, "");
  }

  // The usage charts: data from a JSON script element (not executed; the CSP allows it).
  function usageCharts() {
    const dataEl = document.getElementById("usage-data");
    if (!dataEl || typeof window.uPlot !== "function") return;
    let data;
    try { data = JSON.parse(dataEl.textContent); } catch (_) { return; }
    if (!data.days || data.days.length === 0) return;
    // Each point's start: given (days or hours), or read from a day's date.
    const xs = data.times || data.days.map(function (d) { return Date.parse(d + "T00:00:00Z") / 1000; });
    const palette = ["#3f8f7a", "#6b5bd2", "#d08a2e", "#c8453b", "#2f7fc1", "#8a8f3a", "#b05aa0", "#5c6b73"];
    document.querySelectorAll(".chart[data-metric]").forEach(function (el) {
      const metric = el.getAttribute("data-metric");
      const series = [{}];
      const columns = [xs];
      data.models.forEach(function (model, i) {
        series.push({
          label: model || "(no model)",
          stroke: palette[i % palette.length],
          fill: palette[i % palette.length] + "33",
          width: 2,
          value: function (_, v) { return v === null ? "–" : metric === "cost" ? usd(v) : Math.round(v).toLocaleString(); },
        });
        columns.push(data[metric][i]);
      });
      el.textContent = "";
      const width = Math.max(280, el.clientWidth - 16);
      const plot = new window.uPlot({
        width: width,
        height: 240,
        series: series,
        axes: [{}, { values: function (_, ticks) { return ticks.map(function (v) { return metric === "cost" ? usd(v) : v.toLocaleString(); }); }, size: 70 }],
        scales: { x: { time: true } },
      }, columns, el);
      window.addEventListener("resize", function () { plot.setSize({ width: Math.max(280, el.clientWidth - 16), height: 240 }); });
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    localiseTimes(document);
    confirmForms();
    progressForms();
    streamingChats();
    copyButtons();
    document.querySelectorAll("[data-stream]").forEach(liveFeed);
    usageCharts();
  });
})();
