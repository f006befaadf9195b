#!/usr/bin/env python3
"""Writes a Metalink 4 document (RFC 5854) for local files, for segget's tests and benchmarks.

Usage: make_meta4.py [--piece-length BYTES] [--piece-type sha-256|sha-1] [--no-hash]
                     [--name NAME] FILE URL[@PRIORITY[@LOCATION]] ... [-- FILE URL ... ]

Each FILE is described with its size, its SHA-256, piece hashes, and the URLs that follow it (until
`--` and the next FILE). The document goes to standard output.
"""
import hashlib
import os
import sys
from xml.sax.saxutils import escape, quoteattr


def describe(path, urls, piece_length, piece_type, with_hash, name):
    size = os.path.getsize(path)
    whole = hashlib.sha256()
    pieces = []
    algo = {"sha-256": hashlib.sha256, "sha-1": hashlib.sha1}[piece_type]
    with open(path, "rb") as f:
        while True:
            block = f.read(piece_length)
            if not block:
                break
            whole.update(block)
            pieces.append(algo(block).hexdigest())
    out = ["  <file name=%s>" % quoteattr(name or os.path.basename(path)), "    <size>%d</size>" % size]
    if with_hash:
        out.append('    <hash type="sha-256">%s</hash>' % whole.hexdigest())
    for u in urls:
        parts = u.split("@")
        attrs = ""
        if len(parts) > 1 and parts[1]:
            attrs += ' priority="%s"' % parts[1]
        if len(parts) > 2 and parts[2]:
            attrs += ' location="%s"' % parts[2]
        out.append("    <url%s>%s</url>" % (attrs, escape(parts[0])))
    if piece_length > 0:
        out.append('    <pieces length="%d" type="%s">' % (piece_length, piece_type))
        out.extend("      <hash>%s</hash>" % h for h in pieces)
        out.append("    </pieces>")
    out.append("  </file>")
    return out


def main(argv):
    piece_length, piece_type, with_hash, name = 1 << 20, "sha-256", True, None
    args = list(argv)
    while args and args[0].startswith("--") and args[0] != "--":
        opt = args.pop(0)
        if opt == "--piece-length":
            piece_length = int(args.pop(0))
        elif opt == "--piece-type":
            piece_type = args.pop(0)
        elif opt == "--no-hash":
            with_hash = False
        elif opt == "--name":
            name = args.pop(0)
        else:
            sys.exit("unknown option " + opt)
    groups, current = [], []
    for a in args:
        if a == "--":
            groups.append(current)
            current = []
        else:
            current.append(a)
    if current:
        groups.append(current)
    lines = ['<?xml version="1.0" encoding="UTF-8"?>', '<metalink xmlns="urn:ietf:params:xml:ns:metalink">',
             "  <generator>segget make_meta4.py</generator>"]
    for g in groups:
        lines += describe(g[0], g[1:], piece_length, piece_type, with_hash, name if len(groups) == 1 else None)
    lines.append("</metalink>")
    sys.stdout.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
