"""Server-side HTML for ``weir ui``: tables, an SVG topology graph and an SVG checkpoint timeline.

Every text that comes from a store is escaped (a component name or a traceback is data, never markup).
The page refreshes its body from ``/t/<topology>/body`` every few seconds with a few lines of JS.
"""

from __future__ import annotations

import time
from html import escape
from typing import Any
from urllib.parse import quote

from weir.checkpoint.history import HistoryEntry
from weir.ui.data import Snapshot

__all__ = ["body_html", "index_html", "page_html"]

CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 0; color: #1d232a; background: #f5f6f8; }
header { background: #1f3a5f; color: #fff; padding: 10px 20px; display: flex; gap: 24px; align-items: baseline; }
header h1 { font-size: 18px; margin: 0; }
header .meta { opacity: .85; font-size: 13px; }
main { padding: 12px 20px; display: grid; grid-template-columns: 1fr 1fr; gap: 14px; }
section { background: #fff; border: 1px solid #d9dde3; border-radius: 6px; padding: 10px 14px; min-width: 0; }
section.wide { grid-column: 1 / -1; }
h2 { font-size: 15px; margin: 0 0 8px; }
table { border-collapse: collapse; width: 100%; font-size: 13px; }
th, td { text-align: left; padding: 3px 8px; border-bottom: 1px solid #eceff3; white-space: nowrap; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
.badge { display: inline-block; padding: 0 6px; border-radius: 8px; font-size: 12px; }
.ok { background: #dff3e4; color: #1d6b32; } .bad { background: #fbe0e0; color: #a01d1d; }
.warn { background: #fff0cc; color: #7a5600; } .info { background: #e4ecfa; color: #1f3a5f; }
pre { background: #1d232a; color: #e8e8e8; padding: 8px; overflow-x: auto; font-size: 12px; border-radius: 4px; }
.error { border-left: 3px solid #c62828; padding-left: 10px; margin-bottom: 10px; }
.legend span { margin-right: 14px; font-size: 12px; }
.legend i { display: inline-block; width: 10px; height: 10px; margin-right: 4px; vertical-align: middle; }
.muted { color: #6b7580; }
"""

JS = """
const REFRESH_MS = %d;
async function refresh() {
  const toggle = document.getElementById('live-toggle');
  if (toggle && !toggle.checked) { return; }
  try {
    const r = await fetch(window.location.pathname.replace(/\\/$/, '') + '/body', {cache: 'no-store'});
    if (r.ok) { document.getElementById('body').innerHTML = await r.text(); }
    document.getElementById('live').textContent = 'live · refreshed ' + new Date().toLocaleTimeString();
  } catch (e) {
    document.getElementById('live').textContent = 'not reachable: ' + e;
  }
}
if (REFRESH_MS > 0) { setInterval(refresh, REFRESH_MS); }
"""

JOB_COLOR = "#3b73b9"
COMMIT_COLOR = "#f0a020"
FAIL_COLOR = "#c62828"
RECOVERY_COLOR = "#7b3fa0"


def _clock(ms: int | None) -> str:
    if ms is None:
        return "-"
    return time.strftime("%H:%M:%S", time.localtime(ms / 1000)) + f".{ms % 1000:03d}"


def _num(v: float | None, digits: int = 1) -> str:
    if v is None:
        return "-"
    if isinstance(v, int) or float(v).is_integer():
        return f"{int(v):,}"
    return f"{v:,.{digits}f}"


def _status_badge(status: str) -> str:
    cls = {
        "committed": "ok",
        "failed": "bad",
        "retrying": "warn",
        "rolled back": "warn",
        "rolled forward": "info",
    }.get(status, "info")
    return f'<span class="badge {cls}">{escape(status)}</span>'


def page_html(title: str, body: str, refresh_s: float) -> str:
    """A whole page: header, ``body`` in ``#body`` and the refresh script."""
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body>"
        f"<header><h1>weir · {escape(title)}</h1>"
        + (
            "<label class='meta'><input type='checkbox' id='live-toggle' checked> follow live</label>"
            if refresh_s > 0
            else ""
        )
        + f"<span class='meta' id='live'>{'live' if refresh_s > 0 else ''}</span></header>"
        f"<div id='body'>{body}</div>"
        f"<script>{JS % int(refresh_s * 1000)}</script></body></html>"
    )


def index_html(where: str, topologies: list[str]) -> str:
    """The list of topologies in the store."""
    if not topologies:
        items = "<p>No topology has a coordinator record in this store yet.</p>"
    else:
        items = (
            "<ul>" + "".join(f"<li><a href='/t/{quote(t, safe='')}'>{escape(t)}</a></li>" for t in topologies) + "</ul>"
        )
    return f"<main><section class='wide'><h2>Topologies in {escape(where)}</h2>{items}</section></main>"


def body_html(s: Snapshot) -> str:
    """The body of a topology's page."""
    rec = s.record or {}
    phase = str(rec.get("phase", "-"))
    summary = (
        f"<p class='muted'>store {escape(s.where)} · record: txid "
        f"<b id='record-txid'>{escape(str(rec.get('txid', '-')))}</b>"
        f" phase <b>{escape(phase)}</b> epoch {escape(str(rec.get('epoch', '-')))}"
        f" · updated {_clock(rec.get('updated_ms'))} · {len(s.entries)} history entries</p>"
    )
    return (
        "<main>"
        f"<section class='wide'>{summary}<h2>Topology</h2>{graph_svg(s.shape)}</section>"
        f"<section class='wide'><h2>Checkpoint timeline</h2>{timeline_svg(s.entries)}</section>"
        f"<section><h2>Throughput per component</h2>{rates_table(s)}</section>"
        f"<section><h2>State namespaces</h2>{namespaces_table(s)}</section>"
        f"<section class='wide'><h2>Last batches</h2>{history_table(s.entries[-15:])}</section>"
        f"<section class='wide' id='errors'><h2>Last errors</h2>{errors_html(s)}</section>"
        "</main>"
    )


# ---- the graph -------------------------------------------------------------------------------
def _layers(comps: list[dict[str, Any]]) -> dict[str, int]:
    """Longest distance from a spout, per component (components come in topological order)."""
    layer: dict[str, int] = {}
    for c in comps:
        ins = [str(i.get("source")) for i in c.get("inputs", [])]
        layer[str(c["id"])] = 1 + max((layer.get(i, 0) for i in ins), default=-1)
    return layer


def graph_svg(shape: dict[str, Any] | None) -> str:
    """Components as boxes (stateful ones shaded, with their parallelism), edges labelled by grouping."""
    comps = [c for c in (shape or {}).get("components", []) if isinstance(c, dict) and "id" in c]
    if not comps:
        return "<p class='muted'>No topology shape stored (written by an older weir).</p>"
    layer = _layers(comps)
    rows: dict[int, list[str]] = {}
    for c in comps:
        rows.setdefault(layer[str(c["id"])], []).append(str(c["id"]))
    bw, bh, gx, gy = 170, 54, 90, 22
    height = max(len(v) for v in rows.values()) * (bh + gy) + gy
    width = len(rows) * (bw + gx) + 20
    pos: dict[str, tuple[int, int]] = {}
    for lx, ids in rows.items():
        top = (height - len(ids) * (bh + gy) + gy) // 2
        for i, cid in enumerate(ids):
            pos[cid] = (10 + lx * (bw + gx), top + i * (bh + gy))
    parts = [
        f"<svg id='graph' xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
        f"viewBox='0 0 {width} {height}' role='img' aria-label='topology graph'>",
        "<defs><marker id='arrow' viewBox='0 0 10 10' refX='10' refY='5' markerWidth='7' markerHeight='7' "
        "orient='auto-start-reverse'><path d='M 0 0 L 10 5 L 0 10 z' fill='#5a6572'/></marker></defs>",
    ]
    for c in comps:
        tx, ty = pos[str(c["id"])]
        for inp in c.get("inputs", []):
            src = str(inp.get("source"))
            if src not in pos:
                continue
            sx, sy = pos[src]
            x1, y1, x2, y2 = sx + bw, sy + bh // 2, tx, ty + bh // 2
            grouping = str(inp.get("grouping", ""))
            fields = inp.get("fields") or []
            label = grouping + (f"({', '.join(map(str, fields))})" if fields else "")
            stream = str(inp.get("stream", "default"))
            if stream != "default":
                label = f"{stream}: {label}"
            parts.append(
                f"<line class='edge' x1='{x1}' y1='{y1}' x2='{x2}' y2='{y2}' stroke='#5a6572' "
                "stroke-width='1.5' marker-end='url(#arrow)'/>"
                f"<text x='{(x1 + x2) // 2}' y='{(y1 + y2) // 2 - 6}' font-size='11' text-anchor='middle' "
                f"fill='#3d4650'>{escape(label)}</text>"
            )
    for c in comps:
        cid = str(c["id"])
        x, y = pos[cid]
        stateful = bool(c.get("stateful"))
        spout = c.get("kind") == "spout"
        fill = "#fff4d6" if stateful else ("#e4ecfa" if spout else "#ffffff")
        stroke = "#b07d00" if stateful else "#1f3a5f"
        kind = "spout" if spout else ("stateful bolt" if stateful else "bolt")
        parts.append(
            f"<g class='component' data-component='{escape(cid)}' data-stateful='{str(stateful).lower()}'>"
            f"<rect x='{x}' y='{y}' width='{bw}' height='{bh}' rx='6' fill='{fill}' stroke='{stroke}' "
            f"stroke-width='{2 if stateful else 1.2}'/>"
            f"<text x='{x + 10}' y='{y + 20}' font-size='14' font-weight='600'>{escape(cid)}</text>"
            f"<text x='{x + 10}' y='{y + 40}' font-size='11' fill='#3d4650'>"
            f"{escape(kind)} · {escape(str(c.get('class', '')))} ×{int(c.get('parallelism', 1))}</text>"
            f"<title>{escape(cid)}: {escape(kind)}, parallelism {int(c.get('parallelism', 1))}</title></g>"
        )
    parts.append("</svg>")
    return "".join(parts)


# ---- the timeline ----------------------------------------------------------------------------
def timeline_svg(entries: list[HistoryEntry]) -> str:
    """Job and commit time per txid as stacked bars; failed attempts and recoveries marked."""
    shown = entries[-60:]
    if not shown:
        return "<p class='muted'>No checkpoint history yet.</p>"
    width, height, left, bottom, top = 1100, 230, 76, 36, 22
    plot_h = height - bottom - top
    slot = (width - left - 10) / max(len(shown), 12)
    peak = max([(e.job_ms or 0) + (e.commit_ms or 0) for e in shown] + [1.0])
    parts = [
        f"<svg id='timeline' xmlns='http://www.w3.org/2000/svg' width='100%' viewBox='0 0 {width} {height}' "
        "role='img' aria-label='checkpoint timeline'>",
        f"<line x1='{left}' y1='{top + plot_h}' x2='{width - 5}' y2='{top + plot_h}' stroke='#9aa3ad'/>",
        f"<text x='{left - 6}' y='{top + 4}' font-size='11' text-anchor='end'>{_num(peak, 0)} ms</text>",
        f"<text x='{left - 6}' y='{top + plot_h}' font-size='11' text-anchor='end'>0</text>",
    ]
    for i, e in enumerate(shown):
        x = left + i * slot + slot * 0.15
        w = slot * 0.7
        cx = x + w / 2
        if e.kind == "recovery":
            parts.append(
                f"<g class='recovery' data-txid='{e.txid}'><line x1='{cx:.1f}' y1='{top}' x2='{cx:.1f}' "
                f"y2='{top + plot_h}' stroke='{RECOVERY_COLOR}' stroke-width='2' stroke-dasharray='5 3'/>"
                f"<text x='{cx:.1f}' y='{top - 6}' font-size='11' text-anchor='middle' fill='{RECOVERY_COLOR}'>"
                f"recovery</text><title>recovery at {_clock(e.ended_ms)}: txid {e.txid} {escape(e.status)} "
                f"({escape(e.note)})</title></g>"
            )
            continue
        job, commit = e.job_ms or 0.0, e.commit_ms or 0.0
        hj, hc = plot_h * job / peak, plot_h * commit / peak
        y_job = top + plot_h - hj
        failed = e.failure_count > 0 or e.status == "failed"
        interrupted = e.status in ("preparing", "committing") and i < len(shown) - 1
        outline = f" stroke='{FAIL_COLOR}' stroke-width='2'" if failed else ""
        tip = (
            f"txid {e.txid} (batch {e.batch_id}) {e.status}: job {_num(e.job_ms)} ms, commit {_num(e.commit_ms)} ms, "
            f"{e.attempts} attempt(s), {e.tuples_in} tuples in"
        )
        if failed:
            tip += f", {e.failure_count} failed task(s)"
        if interrupted:
            tip += " (the driver stopped here: see the recovery after it)"
        classes = "batch" + (" failed" if failed else "") + (" interrupted" if interrupted else "")
        parts.append(
            f"<g class='{classes}' data-txid='{e.txid}' data-status='{escape(e.status)}'>"
            f"<rect x='{x:.1f}' y='{y_job:.1f}' width='{w:.1f}' height='{max(hj, 1):.1f}' fill='{JOB_COLOR}'{outline}/>"
            f"<rect x='{x:.1f}' y='{y_job - hc:.1f}' width='{w:.1f}' height='{hc:.1f}' fill='{COMMIT_COLOR}'/>"
            f"<text x='{cx:.1f}' y='{top + plot_h + 14}' font-size='11' text-anchor='middle'>{e.txid}</text>"
            f"<title>{escape(tip)}</title>"
        )
        if failed:
            parts.append(
                f"<text class='fail-mark' x='{cx:.1f}' y='{y_job - hc - 5:.1f}' font-size='14' font-weight='700' "
                f"text-anchor='middle' fill='{FAIL_COLOR}'>✕</text>"
            )
        if interrupted:
            parts.append(
                f"<text x='{cx:.1f}' y='{y_job - hc - 5:.1f}' font-size='11' text-anchor='middle' "
                f"fill='{RECOVERY_COLOR}'>{escape(e.status)}…</text>"
            )
        parts.append("</g>")
    parts.append(
        f"<text x='{(left + width) / 2}' y='{height - 4}' font-size='11' text-anchor='middle' "
        "fill='#5a6572'>txid</text>"
    )
    parts.append("</svg>")
    legend = (
        "<div class='legend'>"
        f"<span><i style='background:{JOB_COLOR}'></i>batch (job) ms</span>"
        f"<span><i style='background:{COMMIT_COLOR}'></i>commit ms</span>"
        f"<span><i style='background:{FAIL_COLOR}'></i>✕ failed attempt(s)</span>"
        f"<span><i style='background:{RECOVERY_COLOR}'></i>recovery after a crash (the txid it found "
        "preparing… or committing… is marked)</span></div>"
    )
    return "".join(parts) + legend


# ---- tables ----------------------------------------------------------------------------------
def rates_table(s: Snapshot) -> str:
    """Tuples in/out per component over the history window, per second and in the last batch."""
    if not s.rates:
        return "<p class='muted'>No committed batch yet.</p>"
    head = (
        "<table id='rates'><tr><th>component</th><th class='num'>in/s</th><th class='num'>out/s</th>"
        "<th class='num'>in (window)</th><th class='num'>out (window)</th><th class='num'>failed</th>"
        "<th class='num'>last batch in</th></tr>"
    )
    rows = "".join(
        f"<tr data-component='{escape(r.component)}'><td>{escape(r.component)}</td>"
        f"<td class='num'>{_num(r.in_per_s)}</td><td class='num'>{_num(r.out_per_s)}</td>"
        f"<td class='num'>{_num(r.tuples_in)}</td><td class='num'>{_num(r.tuples_out)}</td>"
        f"<td class='num'>{_num(r.failed)}</td><td class='num'>{_num(r.last_in)}</td></tr>"
        for r in s.rates
    )
    return head + rows + "</table>"


def namespaces_table(s: Snapshot) -> str:
    """State namespaces with their key counts and committed txid."""
    if not s.namespaces:
        return "<p class='muted'>No state namespaces.</p>"
    rows = "".join(
        f"<tr data-namespace='{escape(n)}'><td>{escape(n)}</td><td class='num'>{_num(k)}</td>"
        f"<td class='num'>{'-' if c is None else c}</td></tr>"
        for n, k, c in s.namespaces
    )
    return (
        "<table id='namespaces'><tr><th>namespace</th><th class='num'>keys</th>"
        f"<th class='num'>committed txid</th></tr>{rows}</table>"
    )


def history_table(entries: list[HistoryEntry]) -> str:
    """The newest entries, newest first."""
    if not entries:
        return "<p class='muted'>No checkpoint history yet.</p>"
    rows = []
    for e in reversed(entries):
        rows.append(
            f"<tr><td class='num'>{e.seq}</td><td>{escape(e.kind)}</td><td class='num'>{e.txid}</td>"
            f"<td>{_status_badge(e.status)}</td><td class='num'>{e.attempts or '-'}</td>"
            f"<td>{_clock(e.started_ms)}</td><td class='num'>{_num(e.job_ms)}</td>"
            f"<td class='num'>{_num(e.commit_ms)}</td><td class='num'>{_num(e.tuples_in)}</td>"
            f"<td class='num'>{_num(sum(e.keys_written.values()))}</td><td class='num'>{e.failure_count}</td></tr>"
        )
    return (
        "<table id='history'><tr><th class='num'>seq</th><th>kind</th><th class='num'>txid</th><th>status</th>"
        "<th class='num'>attempts</th><th>started</th><th class='num'>job ms</th><th class='num'>commit ms</th>"
        "<th class='num'>tuples in</th><th class='num'>keys written</th><th class='num'>failures</th></tr>"
        + "".join(rows)
        + "</table>"
    )


def errors_html(s: Snapshot) -> str:
    """The last failures, newest first, each with its traceback."""
    if not s.errors:
        return "<p class='muted'>No errors in the history.</p>"
    out = []
    for e, f in s.errors:
        tb = str(f.get("traceback") or "").rstrip()
        out.append(
            f"<div class='error' data-txid='{e.txid}'><b>txid {e.txid}</b> attempt {escape(str(f.get('attempt')))} · "
            f"component <b>{escape(str(f.get('component')))}</b> task {escape(str(f.get('task')))} · "
            f"{_clock(e.ended_ms)}<br><code>{escape(str(f.get('error')))}</code>"
            + (f"<details open><summary>traceback</summary><pre>{escape(tb)}</pre></details>" if tb else "")
            + "</div>"
        )
    return "".join(out)
