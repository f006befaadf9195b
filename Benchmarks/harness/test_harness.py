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


def _rec(tool: str, wall: float, on_disk: float | None = None, ok: bool = True) -> dict:
    return {"scenario": "batch-small", "tool": tool, "ok": ok, "wall_s": wall, "on_disk_s": on_disk}


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
        self.assertEqual(args.batch_spec, {"batch-small": (500, 64 << 10), "batch-capped": (100, 4 << 20)})
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

    def test_sync_is_timed(self):
        self.assertGreaterEqual(measure.sync_all(), 0.0)


if __name__ == "__main__":
    unittest.main()
