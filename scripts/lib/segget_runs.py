"""Reads what a segget run left for the server matrix (scripts/tests/servers.sh): its `--json` lines
(docs/json.md) and the written bitmap of its journal (docs/journal-format.md).

  segget_runs.py chunks JOURNAL CHUNKS
      prints how many of the file's CHUNKS the journal's written bitmap marks finished (0 while there
      is no readable journal yet).
  segget_runs.py completed FILE
      prints the `completed` bytes of the last "progress" line a run has written so far (0 if none).
  segget_runs.py wait-chunks JOURNAL CHUNKS WANT PID
  segget_runs.py wait-completed FILE WANT PID
      wait (every 20 ms, at most 60 s) until the journal marks WANT chunks finished, or the --json
      FILE's progress shows WANT bytes completed, or process PID has ended; print what was seen.
      One process for the whole wait: a shell loop starting one per look fell behind on a busy
      machine, and segget finished before the kill.
  segget_runs.py json FILE --size N --connections C --ranged yes|no [--fresh | --resumed-at-least B]
                     [--notice TEXT] [--opened-at-least K]
      checks the run's JSON lines: every line one object with a "type"; no "error"; one "finish" with
      the file's length, C connections and `ranged` as given; the "summary" last, with one file
      succeeded and exit code 0; the finish's counts add up (received - refetched == bytes - resumed).
      --fresh: nothing resumed; --resumed-at-least B: at least B bytes
      resumed (the chunks the journal held were kept, not fetched again); --notice: a "notice" whose
      message contains TEXT; --opened-at-least K: the finish's `connectionsOpened` is at least K (over
      HTTP/2, one file's ranges each have a connection of their own, not a stream on a shared one).
      Prints "resumed=R received=Q refetched=F seconds=S opened=O"; exits 1 naming the first check that failed.

`received` is not compared with the file: a fresh run's `received` leaves out the bytes of the probe's
answer (8 KiB over TLS, up to a chunk over HTTP), and the end game's races may add a few chunks.
"""
import argparse
import json
import os
import struct
import sys
import time


def chunks_done(path, chunks):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return 0
    if len(data) < 16:
        return 0
    (header_length,) = struct.unpack_from("<I", data, 12)
    bitmap = data[header_length + 64:header_length + 64 + (chunks + 7) // 8]
    return sum(bin(b).count("1") for b in bitmap)


def last_completed(path):
    completed = 0
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue  # the line being written
                if isinstance(event, dict) and event.get("type") == "progress":
                    completed = event.get("completed", completed)
    except OSError:
        pass
    return completed


def check_json(path, size, connections, ranged, fresh, resumed_at_least, notice, opened_at_least=None, requests=None):
    with open(path, encoding="utf-8") as f:
        lines = [line for line in f.read().split("\n") if line]
    if not lines:
        return "no JSON lines on stdout"
    events = []
    for n, line in enumerate(lines, 1):
        try:
            event = json.loads(line)
        except ValueError as e:
            return f"line {n} is not JSON ({e}): {line[:200]}"
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            return f"line {n} is not an object with a type: {line[:200]}"
        events.append(event)
    errors = [e for e in events if e["type"] == "error"]
    if errors:
        return f"an error event: {errors[0].get('message')}"
    finishes = [e for e in events if e["type"] == "finish"]
    if len(finishes) != 1:
        return f"{len(finishes)} finish events, expected 1"
    fin = finishes[0]
    summary = events[-1]
    if summary["type"] != "summary":
        return f"the last line is a {summary['type']!r}, not the summary"
    want = {"files": 1, "succeeded": 1, "failed": 0, "exitCode": 0, "bytes": size}
    for key, value in want.items():
        if summary.get(key) != value:
            return f"summary {key} is {summary.get(key)!r}, expected {value!r}"
    if fin.get("bytes") != size:
        return f"finish bytes {fin.get('bytes')!r}, expected {size}"
    if fin.get("connections") != connections:
        return f"finish connections {fin.get('connections')!r}, expected {connections}"
    if fin.get("ranged") is not ranged:
        return f"finish ranged {fin.get('ranged')!r}, expected {ranged}"
    resumed, received = fin.get("resumed"), fin.get("received")
    if not isinstance(resumed, int) or not isinstance(received, int):
        return f"finish resumed/received are not integers: {resumed!r}, {received!r}"
    if received <= 0:
        return f"finish received {received} bytes"
    if fresh and resumed != 0:
        return f"a fresh download resumed {resumed} bytes"
    refetched = fin.get("refetched")
    if not isinstance(refetched, int) or received - refetched != size - resumed:
        return (f"finish received {received} - refetched {refetched!r} is not bytes {size} - resumed {resumed}: "
                "the counts do not add up")
    if resumed_at_least is not None and resumed < resumed_at_least:
        return f"resumed {resumed} bytes, expected at least {resumed_at_least} (the journal held them at the kill)"
    if notice is not None:
        messages = [e.get("message", "") for e in events if e["type"] == "notice"]
        if not any(notice in m for m in messages):
            return f"no notice saying {notice!r} (notices: {messages})"
    opened = fin.get("connectionsOpened")
    if opened_at_least is not None and (not isinstance(opened, int) or opened < opened_at_least):
        return f"finish connectionsOpened {opened!r}, expected at least {opened_at_least} (a connection per range)"
    if requests is not None and summary.get("requests") != requests:
        return f"summary requests {summary.get('requests')!r}, expected {requests}"
    print(f"resumed={resumed} received={received} refetched={refetched} seconds={fin.get('seconds')} opened={opened}")
    return None


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "chunks":
        print(chunks_done(sys.argv[2], int(sys.argv[3])))
        return 0
    if len(sys.argv) >= 2 and sys.argv[1] == "completed":
        print(last_completed(sys.argv[2]))
        return 0
    if len(sys.argv) >= 2 and sys.argv[1] in ("wait-chunks", "wait-completed"):
        if sys.argv[1] == "wait-chunks":
            journal, chunks, want, pid = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
            look = lambda: chunks_done(journal, chunks)
        else:
            path, want, pid = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
            look = lambda: last_completed(path)
        deadline = time.monotonic() + 60
        seen = look()
        while seen < want and time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except OSError:
                break
            time.sleep(0.02)
            seen = look()
        print(seen)
        return 0
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["json"])
    parser.add_argument("file")
    parser.add_argument("--size", type=int, required=True)
    parser.add_argument("--connections", type=int, required=True)
    parser.add_argument("--ranged", choices=["yes", "no"], required=True)
    parser.add_argument("--fresh", action="store_true")
    parser.add_argument("--resumed-at-least", type=int)
    parser.add_argument("--notice")
    parser.add_argument("--opened-at-least", type=int)
    parser.add_argument("--requests", type=int, help="the summary's requests, exactly")
    a = parser.parse_args()
    problem = check_json(a.file, a.size, a.connections, a.ranged == "yes", a.fresh, a.resumed_at_least, a.notice,
                         a.opened_at_least, a.requests)
    if problem:
        print(problem)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
