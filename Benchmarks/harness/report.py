"""Markdown tables and a hand-written SVG chart from the per-run records."""

from __future__ import annotations

import statistics
from html import escape

MiB = 1 << 20

TOOL_ORDER = ["segget", "segget-n1", "curl", "aria2c", "aria2c-autosave1", "axel", "lftp", "wget2"]
COLORS = {
    "segget": "#d62728", "segget-n1": "#e377c2", "curl": "#7f7f7f", "aria2c": "#1f77b4", "aria2c-autosave1": "#17becf",
    "axel": "#2ca02c", "lftp": "#9467bd", "wget2": "#ff7f0e",
}


def _order(names) -> list[str]:
    return sorted(set(names), key=lambda n: (TOOL_ORDER.index(n) if n in TOOL_ORDER else 99, n))


def _by(records, scenario):
    out: dict[str, list[dict]] = {}
    for r in records:
        if r["scenario"] == scenario:
            out.setdefault(r["tool"], []).append(r)
    return out


def _range(values) -> str:
    lo, hi = min(values), max(values)
    return f"{lo}" if lo == hi else f"{lo}–{hi}"


def _human(n: int) -> str:
    if n >= 1 << 30 and n % (1 << 30) == 0:
        return f"{n // (1 << 30)} GiB"
    return f"{n / MiB:g} MiB" if n >= MiB else f"{n / 1024:g} KiB"


def _total(r) -> int:
    return r.get("total_bytes", r["size"] * r.get("batch", 1))


def _medians(groups, key):
    return {t: statistics.median(r[key] for r in rs if r["ok"])
            for t, rs in groups.items() if any(r["ok"] and r.get(key) is not None for r in rs)}


def _throughput_table(records, scn, has_segget: bool) -> list[str]:
    groups = _by(records, scn.name)
    medians = _medians(groups, "wall_s")
    base_name = "segget" if has_segget else (min(medians, key=medians.get) if medians else None)
    base = medians.get(base_name) if base_name else None
    ratio_head = "× segget" if has_segget else "× fastest"
    disk_medians = _medians(groups, "on_disk_s")
    disk_base_name = "segget" if has_segget else (min(disk_medians, key=disk_medians.get) if disk_medians else None)
    disk_base = disk_medians.get(disk_base_name) if disk_base_name else None
    small = scn.kind in ("small", "seq")
    head = ["tool", "median s", "min s", "max s", "MiB/s", ratio_head]
    if small:
        head.insert(4, "ms per download")
    if scn.kind == "batch":
        head.insert(4, "ms per file")
    if disk_medians:
        head += ["until on disk s (median)", "min–max", f"on disk {ratio_head}"]
    head += ["CPU s", "peak RSS MiB", "server MiB", "conns"]
    if scn.name == "uneven":
        head.append("slow conns")
    head.append("OK/FAIL")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for tool in _order(groups):
        rs = groups[tool]
        good = [r for r in rs if r["ok"]]
        okfail = f"{len(good)}/{len(rs) - len(good)}"
        if not good:
            row = [tool] + ["FAIL"] + ["—"] * (len(head) - 3) + [okfail]
            lines.append("| " + " | ".join(row) + " |")
            continue
        walls = [r["wall_s"] for r in good]
        med = statistics.median(walls)
        size = _total(good[0])
        row = [f"**{tool}**" if tool == "segget" else tool, f"{med:.2f}", f"{min(walls):.2f}",
               f"{max(walls):.2f}"]
        if small:
            row.append(f"{med / good[0]['batch'] * 1000:.0f}")
        if scn.kind == "batch":
            row.append(f"{med / good[0]['files'] * 1000:.1f}")
        row += [
            f"{size / MiB / med:.1f}",
            f"{med / base:.2f}" if base else "—",
        ]
        if disk_medians:
            on_disk = [r["on_disk_s"] for r in good if r.get("on_disk_s") is not None]
            if on_disk:
                dmed = statistics.median(on_disk)
                row += [f"{dmed:.2f}", f"{min(on_disk):.2f}–{max(on_disk):.2f}",
                        f"{dmed / disk_base:.2f}" if disk_base else "—"]
            else:
                row += ["—", "—", "—"]
        row += [
            f"{statistics.median(r['cpu_s'] for r in good):.2f}",
            f"{max(r['maxrss_kib'] for r in good) / 1024:.1f}",
            f"{statistics.median(r['server_bytes'] for r in good) / MiB:.1f}",
            _range([r["connections"] for r in good]),
        ]
        if scn.name == "uneven":
            row.append(_range([r["slow_connections"] for r in good]))
        row.append(okfail)
        lines.append("| " + " | ".join(row) + " |")
    return lines + _against_fastest_peer(medians, disk_medians) + _failures(groups)


def _against_fastest_peer(medians, disk_medians) -> list[str]:
    """segget's medians over the fastest peer's, the form the goals in issue 13 are stated in."""
    out = []
    for name in ("segget", "segget-n1"):
        parts = []
        for what, meds in (("wall time", medians), ("until on disk", disk_medians)):
            peers = {t: v for t, v in meds.items() if not t.startswith("segget")}
            if name in meds and peers:
                best = min(peers, key=peers.get)
                parts.append(f"{what} {meds[name] / peers[best]:.2f} × {best}")
        if parts:
            out.append(f"- {name} ÷ the fastest peer: " + "; ".join(parts))
    return [""] + out if out else []


def _failures(groups) -> list[str]:
    fails = [r for t in _order(groups) for r in groups[t] if not r["ok"]]
    if not fails:
        return []
    return ["", "FAIL runs:", ""] + [
        f"- {r['tool']}{f' ({v})' if (v := r.get('variant')) else ''} rep {r['rep']}: {r['fail']}" for r in fails]


def _diskbusy_table(records, scn) -> list[str]:
    """Per tool and writer: wall times beside the quiet runs', connections, segget's re-dial lines."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in records:
        if r["scenario"] == scn.name:
            groups.setdefault((r["tool"], r["variant"]), []).append(r)
    quiet = {t: statistics.median(r["wall_s"] for r in rs if r["ok"])
             for (t, v), rs in groups.items() if v == "quiet" and any(r["ok"] for r in rs)}
    head = ["tool", "other writer", "median s", "min s", "max s", "× quiet", "conns",
            "re-dial lines (segget)", "disk MiB/s during the run (all writers)", "OK/FAIL"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    keys = sorted(groups, key=lambda k: (_order(t for t, _ in groups).index(k[0]), k[1] != "quiet", k[1]))
    for tool, variant in keys:
        rs = groups[(tool, variant)]
        good = [r for r in rs if r["ok"]]
        okfail = f"{len(good)}/{len(rs) - len(good)}"
        name = f"**{tool}**" if tool == "segget" else tool
        writer = "none (quiet)" if variant == "quiet" else f"`{variant}` loop"
        if not good:
            lines.append("| " + " | ".join([name, writer] + ["FAIL"] + ["—"] * (len(head) - 4) + [okfail]) + " |")
            continue
        walls = [r["wall_s"] for r in good]
        med = statistics.median(walls)
        dev = [r["device_written_bytes"] / MiB / r["wall_s"] for r in good if r.get("device_written_bytes") is not None]
        row = [
            name, writer, f"{med:.2f}", f"{min(walls):.2f}", f"{max(walls):.2f}",
            f"{med / quiet[tool]:.2f}" if tool in quiet else "—",
            _range([r["connections"] for r in good]),
            _range([r["redial_lines"] for r in good]) if tool.startswith("segget") else "—",
            f"{statistics.median(dev):.0f}" if dev else "—",
            okfail,
        ]
        lines.append("| " + " | ".join(row) + " |")
    examples = [e for k in keys for r in groups[k] for e in r.get("redial_examples", [])][:5]
    if examples:
        lines += ["", "Re-dial lines, first few:", ""] + [f"- `{e}`" for e in examples]
    writers = sorted({r["writer_cmd"] for rs in groups.values() for r in rs if r.get("writer_cmd")})
    if writers:
        lines += ["", "Writers: " + "; ".join(f"`{w}`" for w in writers)]
    return lines + _failures({f"{t} ({v})": rs for (t, v), rs in groups.items()})


def _memory_table(records, scn) -> list[str]:
    """One row per segget variant (-n 8, -n 64, --checksum): peak RSS first, the point of the scenario."""
    groups: dict[str, list[dict]] = {}
    for r in records:
        if r["scenario"] == scn.name:
            groups.setdefault(r["variant"], []).append(r)
    head = ["segget", "peak RSS MiB (largest)", "smallest", "median s", "MiB/s", "CPU s", "conns", "OK/FAIL"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for variant, rs in groups.items():
        good = [r for r in rs if r["ok"]]
        okfail = f"{len(good)}/{len(rs) - len(good)}"
        if not good:
            lines.append("| " + " | ".join([f"`{variant}`", "FAIL"] + ["—"] * (len(head) - 3) + [okfail]) + " |")
            continue
        rss = [r["maxrss_kib"] / 1024 for r in good]
        med = statistics.median(r["wall_s"] for r in good)
        lines.append("| " + " | ".join([
            f"`{variant}`", f"{max(rss):.1f}", f"{min(rss):.1f}", f"{med:.2f}",
            f"{_total(good[0]) / MiB / med:.1f}", f"{statistics.median(r['cpu_s'] for r in good):.2f}",
            _range([r["connections"] for r in good]), okfail]) + " |")
    return lines + _failures({f"segget {v}": rs for v, rs in groups.items()})


def _dd_lines(disk: dict, args) -> list[str]:
    fs = disk["filesystem"]
    out = [f"- Download directory `{args.out}/dl` on {fs.get('source')} ({fs.get('fstype')}, "
           f"mounted at {fs.get('target')} with {fs.get('options')}); device {fs.get('device')}, "
           f"rotational {fs.get('rotational')}, scheduler {fs.get('scheduler')}, model {fs.get('model') or 'unknown'}"]
    for scenario, probe in (disk.get("inode_probe") or {}).items():
        out.append(f"- Before `{scenario}`: 200 empty files made in the download directory in "
                   f"{', '.join(f'{t:g}' for t in probe['ms'])} ms"
                   + (f" (waited {probe['waited_s']:g} s for it to be quiet)" if len(probe["ms"]) > 1 else "")
                   + ("" if probe["quiet"] else "; still slow when the runs began"))
    before, after = disk.get("dd_before"), disk.get("dd_after")
    if not before:
        return out + ["- Disk write rate: not measured (`--dd-size 0`)."]

    def cell(r):
        return f"{r['seconds']:.2f} s ({r['mib_s']:.0f} MiB/s)" if r.get("mib_s") else f"failed: {r['error']}"

    size = before[0]["bytes"]
    out += ["", f"Disk write rate: `dd if=/dev/zero bs=1M count={size // MiB}` into `{args.out}/ddtest`, "
            "after a `sync`, timed:", "",
            "| dd | before the runs | after the runs |", "|---|---|---|"]
    for i, r in enumerate(before):
        flags = r["cmd"].split(" status=none ")[-1] if " status=none " in r["cmd"] else ""
        out.append(f"| {r['name']} (`{flags}`) | {cell(r)} | {cell(after[i]) if after else '—'} |")
    return out


def _killresume_table(records, scn) -> list[str]:
    groups = _by(records, scn.name)
    head = ["tool", "kills", "fetched twice MiB (median)", "% of file (median)", "% min–max",
            "identical", "exit codes", "wall s (all attempts)", "CPU s", "OK/FAIL"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for tool in _order(groups):
        rs = groups[tool]
        size = rs[0]["size"]
        twice = [r["twice_bytes"] for r in rs]
        pct = [100 * t / size for t in twice]
        identical = sum(1 for r in rs if r["identical"])
        good = len([r for r in rs if r["ok"]])
        row = [
            f"**{tool}**" if tool == "segget" else tool,
            _range([r["kills"] for r in rs]),
            f"{statistics.median(twice) / MiB:.0f}",
            f"{statistics.median(pct):.0f} %",
            f"{min(pct):.0f}–{max(pct):.0f} %",
            f"{identical}/{len(rs)}",
            _range([r["exit_code"] for r in rs]),
            f"{statistics.median(r['wall_s'] for r in rs):.1f}",
            f"{statistics.median(r['cpu_s'] for r in rs):.2f}",
            f"{good}/{len(rs) - good}",
        ]
        lines.append("| " + " | ".join(row) + " |")
    return lines + _failures(groups)


def markdown(records, ctx) -> str:
    args, m = ctx["args"], ctx["machine"]
    has_segget = "segget" in ctx["tools"]
    out = [
        "# segget benchmark results",
        "",
        f"- Command: `{ctx['command_line']}`",
        f"- Date: {ctx['date']} (took {ctx['elapsed_s'] / 60:.1f} min)",
        f"- Machine: {m['nproc']} CPUs ({m['cpu']}), {m['memory_gib']} GiB RAM, Linux {m['kernel']}, "
        f"load average at start {', '.join(f'{x:.2f}' for x in m['loadavg_at_start'])}",
        f"- Tree: commit {m['commit']}",
        *_dd_lines(ctx["disk"], args),
        "",
        f"- Data: {_human(args.size)} of random bytes (kill-and-resume: {_human(args.kill_size)}), served by "
        "nginx on 127.0.0.1 from the page cache (sendfile on, keepalive on); caches are never dropped, "
        "and every run's sources are read through just before it (this VM's host pages out what was "
        "not touched for a minute); "
        "outputs go to the same file system and are deleted after each run.",
        f"- {args.connections} connections per tool (curl: 1); {args.reps} repetitions, interleaved "
        "(every tool once per repetition, order rotated each time); a run is OK only if it exits 0 and "
        "its output is byte-for-byte the source (`cmp`); FAIL runs are not timed.",
        "",
        "## Versions",
        "",
        "| tool | version |",
        "|---|---|",
    ]
    out += [f"| {t} | {escape(v)} |" for t, v in ctx["versions"].items()]
    if ctx["notes"]:
        out += ["", "## Notes", ""] + [f"- {n}" for n in ctx["notes"]]
    for name in args.scenarios:
        scn = ctx["scenarios"][name]
        out += ["", f"## {scn.name}", "", scn.description[0].upper() + scn.description[1:] + "."]
        if scn.kind == "small":
            out[-1] += (f" One run = {args.small_batch} downloads; times are for the whole batch, "
                        "CPU is summed, RSS is the largest.")
        if scn.kind == "seq":
            out[-1] += (f" One run = {args.seq_count} downloads in one `sh` script; CPU and peak RSS "
                        "are the script's and its children's.")
        if scn.kind == "batch":
            count, size = args.batch_spec[scn.name]
            out[-1] += (f" {count} files of {_human(size)}, {args.batch_jobs} in flight; every run is "
                        "checked file by file (count, no leftovers, bytes). segget runs with its "
                        "default -n and as segget-n1 with `-n 1`.")
        if scn.kind in ("throughput", "seq", "batch"):
            out[-1] += (" \"Until on disk\" spans the tool's start to the end of a `sync` run the moment "
                        "it exits; every run starts after a `sync` and a rest of "
                        f"{args.settle:g} s.")
        if scn.kind == "diskbusy":
            out[-1] += (" Each tool runs quiet and with each writer back to back, in rotated order; the "
                        "writer starts 1 s before the tool and is killed when it exits.")
        if scn.kind == "killresume":
            out[-1] += (f" {args.kills} SIGKILLs, {args.kill_after:g} s into each attempt (fewer when the "
                        "tool finishes first). \"Fetched twice\" = response body bytes nginx sent over all "
                        "attempts minus the file size (bytes in flight in socket buffers at a kill count "
                        "as sent).")
        if scn.skip:
            out[-1] += " Not run: " + "; ".join(f"{t} ({why})" for t, why in scn.skip.items()) + "."
        out.append("")
        if scn.kind == "killresume":
            out += _killresume_table(records, scn)
        elif scn.kind == "diskbusy":
            out += _diskbusy_table(records, scn)
        elif scn.kind == "memory":
            out += _memory_table(records, scn)
        else:
            out += _throughput_table(records, scn, has_segget)
    out += ["", "## Command lines", "", "`OUT` is the output path, `N` the connection count.", ""]
    seen = set()
    for r in records:
        kind = ctx["scenarios"][r["scenario"]].kind
        key = (r["tool"], r["scenario"] if kind == "batch" else kind,
               r.get("variant") if kind == "memory" else None)
        if key in seen:
            continue
        seen.add(key)
        out.append(f"- {r['tool']} ({r['scenario']}): `{r['cmd']}`")
        if kind == "diskbusy":
            out[-1] += " (quiet and busy runs alike)"
        if r.get("resume_cmd") and r["resume_cmd"] != r["cmd"]:
            out.append(f"  - resume: `{r['resume_cmd']}`")
    return "\n".join(out) + "\n"


def svg(records, ctx) -> str:
    """Median throughput per scenario and tool, one horizontal-bar panel per scenario."""
    args = ctx["args"]
    panels = []
    for name in args.scenarios:
        scn = ctx["scenarios"][name]
        if scn.kind in ("killresume", "diskbusy", "memory"):
            continue
        groups = _by(records, name)
        rows = []
        for tool in _order(groups):
            good = [r for r in groups[tool] if r["ok"]]
            if good:
                med = statistics.median(r["wall_s"] for r in good)
                rows.append((tool, _total(good[0]) / MiB / med))
            else:
                rows.append((tool, None))
        if rows:
            panels.append((scn, rows))
    width, left, right, bar_h, gap = 760, 130, 90, 18, 6
    y = 50
    parts = []
    for scn, rows in panels:
        top = max((v for _, v in rows if v), default=1.0)
        parts.append(f'<text x="10" y="{y}" font-weight="bold">{escape(scn.name)}</text>')
        parts.append(f'<text x="{left}" y="{y}" fill="#555">{escape(scn.description[:90])}</text>')
        y += 10
        for tool, v in rows:
            parts.append(f'<text x="{left - 8}" y="{y + bar_h - 4}" text-anchor="end">{escape(tool)}</text>')
            if v is None:
                parts.append(f'<text x="{left + 4}" y="{y + bar_h - 4}" fill="#b00">FAIL</text>')
            else:
                w = max(1.0, (width - left - right) * v / top)
                parts.append(f'<rect x="{left}" y="{y}" width="{w:.1f}" height="{bar_h}" '
                             f'fill="{COLORS.get(tool, "#444")}"><title>{escape(tool)}: {v:.1f} MiB/s'
                             f'</title></rect>')
                parts.append(f'<text x="{left + w + 6:.1f}" y="{y + bar_h - 4}">{v:.1f} MiB/s</text>')
            y += bar_h + gap
        y += 28
    title = (f"Median throughput, {_human(args.size)}, {args.connections} connections, "
             f"{args.reps} reps ({ctx['date'][:10]})")
    head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{y}" '
            f'viewBox="0 0 {width} {y}" font-family="sans-serif" font-size="12">'
            f'<rect width="100%" height="100%" fill="white"/>'
            f'<text x="10" y="22" font-size="15" font-weight="bold">{escape(title)}</text>')
    return head + "".join(parts) + "</svg>\n"
