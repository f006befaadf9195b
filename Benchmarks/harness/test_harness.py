"""Tests of the harness's own checks: a benchmark that cannot notice a wrong output measures nothing.

Run: python3 -B -m unittest discover -s Benchmarks/harness -p 'test_*.py'
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import tempfile
import unittest
from pathlib import Path
from types import SimpleNamespace

sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench  # noqa: E402
import disk  # noqa: E402
import measure  # noqa: E402
import report  # noqa: E402
import wan  # noqa: E402


def _rec(tool: str, wall: float, on_disk: float | None = None, ok: bool = True) -> dict:
    return {"scenario": "batch-small", "tool": tool, "ok": ok, "wall_s": wall, "on_disk_s": on_disk}


class BusyCPUsTests(unittest.TestCase):
    def test_loops_run_inside_and_are_stopped_after(self):
        with bench.BusyCPUs(2) as busy:
            self.assertEqual(len(busy.procs), 2)
            self.assertTrue(all(p.poll() is None for p in busy.procs))
        self.assertTrue(all(p.returncode is not None for p in busy.procs))
        with bench.BusyCPUs(0) as none:
            self.assertEqual(none.procs, [])

    def test_only_the_busy_batch_has_them(self):
        self.assertEqual([n for n, s in bench.SCENARIOS.items() if s.cpu_hogs], ["batch-busy"])


class ParsingTests(unittest.TestCase):
    def test_batch_spec(self):
        self.assertEqual(bench.parse_batch("500x64K"), (500, 64 << 10))
        self.assertEqual(bench.parse_batch("100 x 4M"), (100, 4 << 20))
        for bad in ("500", "x64K", "0x64K", "10xfoo"):
            with self.assertRaises(argparse.ArgumentTypeError, msg=bad):
                bench.parse_batch(bad)

    def test_scenarios_are_selectable(self):
        args = bench.parse_args(["--scenarios", "batch-small,batch-capped,seq-small,disk-busy",
                                 "--busy-writers", "buffered"])
        self.assertEqual(args.scenarios, ["batch-small", "batch-capped", "seq-small", "disk-busy"])
        self.assertEqual(args.busy_writers, ["buffered"])
        self.assertEqual(args.batch_spec, {"batch-small": (500, 64 << 10), "batch-busy": (500, 64 << 10),
                                           "batch-capped": (100, 4 << 20)})
        with self.assertRaises(SystemExit), contextlib.redirect_stderr(io.StringIO()) as err:
            bench.parse_args(["--busy-writers", "sideways"])
        self.assertIn("unknown --busy-writers entry 'sideways'", err.getvalue())


class OutputCheckTests(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        root = Path(self.tmp.name)
        self.src, self.out = root / "src", root / "out"
        self.src.mkdir()
        self.out.mkdir()
        self.names = [f"f{i:04d}.bin" for i in range(3)]
        for n in self.names:
            data = os.urandom(5000)
            (self.src / n).write_bytes(data)
            (self.out / n).write_bytes(data)
        self.bench = bench.Bench.__new__(bench.Bench)  # check_files needs no state

    def tearDown(self):
        self.tmp.cleanup()

    def check(self):
        return self.bench.check_files(self.out, {n: self.src / n for n in self.names})

    def test_identical_outputs_pass(self):
        self.assertIsNone(self.check())

    def test_missing_file_fails(self):
        (self.out / "f0001.bin").unlink()
        self.assertIn("1 of 3 files missing", self.check())

    def test_leftover_file_fails(self):
        (self.out / "f0002.bin.aria2").write_bytes(b"x")
        self.assertIn("unexpected files left", self.check())

    def test_one_flipped_byte_fails(self):
        data = bytearray((self.out / "f0000.bin").read_bytes())
        data[4321] ^= 1
        (self.out / "f0000.bin").write_bytes(bytes(data))
        self.assertIn("1 of 3 files differ", self.check())
        self.assertFalse(bench.same_bytes(self.out / "f0000.bin", self.src / "f0000.bin"))

    def test_short_file_fails(self):
        (self.out / "f0002.bin").write_bytes((self.src / "f0002.bin").read_bytes()[:-1])
        self.assertIn("differ", self.check())


class ReportTests(unittest.TestCase):
    def test_ratio_to_the_fastest_peer(self):
        groups = {"segget": [_rec("segget", 2.0, 3.0)], "curl": [_rec("curl", 1.0, 4.0)],
                  "wget2": [_rec("wget2", 0.5, 6.0)], "aria2c": [_rec("aria2c", 0.1, None, ok=False)]}
        lines = report._against_fastest_peer(report._medians(groups, "wall_s"),
                                             report._medians(groups, "on_disk_s"))
        self.assertIn("- segget ÷ the fastest peer: wall time 4.00 × wget2; until on disk 0.75 × curl", lines)

    def test_diskbusy_table_counts_redials_against_quiet(self):
        base = {"scenario": "disk-busy", "ok": True, "connections": 9, "device_written_bytes": 8 << 20,
                "redial_examples": []}
        recs = [dict(base, tool="segget", variant="quiet", wall_s=8.0, redial_lines=0),
                dict(base, tool="segget", variant="dd direct", wall_s=12.0, redial_lines=2,
                     connections=11, redial_examples=["segget: connection 2 is slow (x); reconnecting."],
                     writer_cmd="while :; do dd ...; done")]
        text = "\n".join(report._diskbusy_table(recs, SimpleNamespace(name="disk-busy")))
        self.assertIn("| **segget** | `dd direct` loop | 12.00 | 12.00 | 12.00 | 1.50 | 11 | 2 |", text)
        self.assertIn("connection 2 is slow", text)
        self.assertRegex("connection 2 is slow (1 MiB/s); reconnecting.", bench.REDIAL)


    def test_memory_table_reports_the_largest_peak_per_variant(self):
        base = {"scenario": "memory", "tool": "segget", "ok": True, "wall_s": 1.0, "cpu_s": 0.5,
                "connections": 9, "size": 1 << 30, "total_bytes": 1 << 30, "rep": 1}
        recs = [dict(base, variant="-n 8", maxrss_kib=30 * 1024), dict(base, variant="-n 8", maxrss_kib=41 * 1024),
                dict(base, variant="-n 64", maxrss_kib=60 * 1024, ok=False, fail="exit code 1")]
        text = "\n".join(report._memory_table(recs, SimpleNamespace(name="memory")))
        self.assertIn("| `-n 8` | 41.0 | 30.0 | 1.00 |", text)
        self.assertIn("| `-n 64` | FAIL |", text)
        self.assertIn("- segget (-n 64) rep 1: exit code 1", text)


class DiskTests(unittest.TestCase):
    def test_sectors_written_reads_field_seven(self):
        with tempfile.TemporaryDirectory() as d:
            Path(d, "stat").write_text("  100 0 800 10   2000 0 16000 50 0 60 60\n")
            self.assertEqual(disk.sectors_written(Path(d)), 16000)
        self.assertIsNone(disk.sectors_written(None))

    def test_dd_rates_and_busy_writer(self):
        with tempfile.TemporaryDirectory() as d:
            results = disk.dd_rates(Path(d), 1 << 20)
            self.assertEqual([r["name"] for r in results],
                             ["direct", "direct into a fallocated file", "buffered + fdatasync"])
            buffered = results[2]
            self.assertEqual(buffered["exit_code"], 0, buffered["error"])
            self.assertGreater(buffered["mib_s"], 0)
            self.assertEqual(list(Path(d).iterdir()), [])  # the test file is removed
            w = disk.BusyWriter(Path(d), "buffered", 1 << 20)
            self.assertTrue(w.alive())
            w.stop()
            self.assertFalse(w.alive())
            self.assertFalse(w.target.exists())

    def test_read_through_reads_every_byte(self):
        with tempfile.TemporaryDirectory() as d:
            sizes = [0, 1, (1 << 20) + 3, 3 << 20]
            paths = []
            for i, n in enumerate(sizes):
                p = Path(d, f"s{i}")
                p.write_bytes(os.urandom(n))
                paths.append(p)
            self.assertEqual(disk.read_through(paths), sum(sizes))
            self.assertEqual(disk.read_through([]), 0)
            with self.assertRaises(FileNotFoundError):
                disk.read_through([Path(d, "missing")])

    def test_sync_is_timed(self):
        self.assertGreaterEqual(measure.sync_all(), 0.0)


class WanTests(unittest.TestCase):
    """The emulated-WAN scenarios: parsing what ping, wanlink and segget print, and the table."""

    PING = ("--- 198.18.0.2 ping statistics ---\n"
            "50 packets transmitted, 49 received, 2% packet loss, time 2498ms\n"
            "rtt min/avg/max/mdev = 80.210/80.254/80.629/0.071 ms\n")

    def test_ping_summary(self):
        p = wan.parse_ping(self.PING)
        self.assertEqual((p["sent"], p["received"]), (50, 49))
        self.assertAlmostEqual(p["loss"], 0.02)
        self.assertEqual((p["min"], p["avg"], p["max"]), (80.21, 80.254, 80.629))
        self.assertEqual(wan.parse_ping(""), {})

    def test_wanlink_counters_and_their_difference(self):
        before = wan.parse_stats("up rx_pkts=10 lost=1 syns=2 queue_drops=0\ndown rx_pkts=20 lost=0 syns=0\n")
        after = wan.parse_stats("up rx_pkts=15 lost=1 syns=11 queue_drops=3\ndown rx_pkts=90 lost=4 syns=0\n")
        self.assertEqual(before["up"]["syns"], 2)
        d = wan.stats_delta(before, after)
        self.assertEqual(d["up"]["syns"], 9)
        self.assertEqual(d["up"]["queue_drops"], 3)
        self.assertEqual(d["down"]["lost"], 4)
        self.assertEqual(d["down"]["rx_pkts"], 70)

    def test_redials_are_counted_from_the_debug_trace_only(self):
        lines = ["[3.21] connection 4 redial at 1.2 MB/s vs typical 6.0 MB/s (first bytes take 0.170 s)",
                 "[5.00] connection 2 redial at 900 kB/s vs typical 6.0 MB/s (first bytes take 0.170 s) (racer)",
                 "[5.10] connection 2 gets 1048576..<2097152",
                 "segget: connection 3 is slow (1 MB/s against a median of 6 MB/s); reconnecting."]
        self.assertEqual(wan.count_redials(lines), 2)

    def test_links_and_their_ideal_times(self):
        self.assertAlmostEqual(wan.LINKS["a"].ideal_s(256 << 20, 8), (256 << 20) * 8 / 400e6)
        # link c: no bottleneck, 8 requests at 16 MiB/s
        self.assertAlmostEqual(wan.LINKS["c"].ideal_s(256 << 20, 8), 2.0)
        self.assertAlmostEqual(wan.LINKS["c"].ideal_s(256 << 20, 1), 16.0)
        self.assertIn("0.5 % loss", wan.LINKS["b"].describe())

    def test_options(self):
        a = wan.parse_args(["--links", "a,c", "--reps", "5", "--segget", "/x/segget"])
        self.assertEqual((a.links, a.reps, a.size, a.tls_modes), (["a", "c"], 5, 256 << 20, [False, True]))
        q = wan.parse_args(["--wan-quick", "--no-https"])
        self.assertEqual((q.size, q.reps, q.dd_size, q.tls_modes), (64 << 20, 1, 0, [False]))
        self.assertEqual(wan.parse_args(["--https-only"]).tls_modes, [True])
        with self.assertRaises(SystemExit), contextlib.redirect_stdout(io.StringIO()) as out:
            wan.parse_args(["--help"])
        self.assertIn("0.1 % loss", out.getvalue())  # a bare % would break --help
        with self.assertRaises(SystemExit), contextlib.redirect_stderr(io.StringIO()) as err:
            wan.parse_args(["--links", "a,z"])
        self.assertIn("unknown link 'z'", err.getvalue())

    def _records(self):
        base = {"link": "a", "protocol": "http", "size": 256 << 20, "ok": True, "fail": None,
                "requests": 9, "connections": 8, "syns": 8, "redials": None}
        return [
            dict(base, tool="segget", rep=1, wall_s=8.0, redials=2, connections=10, syns=10, requests=12),
            dict(base, tool="segget", rep=2, wall_s=7.0, redials=0),
            dict(base, tool="segget", rep=3, ok=False, fail="sha256 differs", wall_s=1.0, redials=0),
            dict(base, tool="aria2c", rep=1, wall_s=6.0),
            dict(base, tool="aria2c", rep=2, wall_s=5.0),
            dict(base, tool="aria2c", rep=3, wall_s=7.0),
        ]

    def test_summary_medians_ratio_and_failures(self):
        rows = {r["tool"]: r for r in wan.summarize(self._records())}
        seg, ari = rows["segget"], rows["aria2c"]
        self.assertEqual((seg["ok"], seg["runs"], seg["median_s"]), (2, 3, 7.5))
        self.assertEqual(seg["fails"], ["sha256 differs"])
        self.assertEqual(seg["redials"], [2, 0])
        self.assertAlmostEqual(seg["ratio_aria2c"], 7.5 / 6.0)
        self.assertEqual((ari["min_s"], ari["max_s"], ari["ratio_aria2c"], ari["redials"]), (5.0, 7.0, 1.0, None))

    def test_markdown_and_results_insertion(self):
        args = wan.parse_args(["--links", "a", "--no-https"])
        context = {
            "date": "2026-11-25T19:00:00+00:00", "command_line": "scripts/bench wan --links a",
            "elapsed_s": 60.0, "tcp_cc": "bbr", "args": args, "versions": {"nginx": "nginx/1.22.1"},
            "machine": {"commit": "abc1234", "nproc": 2, "cpu": "X", "memory_gib": 8, "kernel": "6.1",
                        "loadavg_at_start": (0.1, 0.2, 0.3)},
            "disk": {"dd_before": [{"name": "direct", "mib_s": 700.0}]},
            "links": [{"link": "a", "description": wan.LINKS["a"].describe(),
                       "ping": wan.parse_ping(self.PING),
                       "wanlink_totals": {"up": {"lost": 1, "rx_pkts": 1000}, "down": {"lost": 9, "rx_pkts": 9000}}}],
        }
        md = wan.markdown(self._records(), context)
        self.assertIn("## WAN, 2026-11-25, abc1234", md)
        self.assertIn("direct 700 MiB/s", md)
        self.assertIn("| a | 80 ms RTT, 0.1 % loss each way, 400 Mbit/s | 80.2 / 80.3 / 80.6 ms | 2.0 % of 50 | 10 (0.100 % of 10000 packets) / 0 |", md)
        self.assertIn("| segget | 7.50 s | 7.00 s | 8.00 s | 34.1 | 1.25 | 2, 0 | 10, 8 (10, 8) | 12, 9 | 2/3 |", md)
        self.assertIn("| aria2c | 6.00 s | 5.00 s | 7.00 s | 42.7 | 1.00 | – |", md)
        self.assertIn("Failed runs: segget: sha256 differs", md)
        with tempfile.TemporaryDirectory() as d:
            path = Path(d, "RESULTS.md")
            path.write_text("# segget benchmark results\n\n## 2026-11-23, older\n\ntext\n")
            wan.insert_into_results(md, path)
            text = path.read_text()
            self.assertLess(text.index("## WAN, 2026-11-25"), text.index("## 2026-11-23, older"))
            self.assertTrue(text.startswith("# segget benchmark results\n\n## WAN"))


if __name__ == "__main__":
    unittest.main()
