#!/usr/bin/env python3
"""Sorts compute-sanitizer reports by whose code they are in. Usage: sanitizer_report.py LOG...

Each report in a log starts with a line "========= <message>" (not indented) and lists host frames. A report
whose innermost host frame outside the CUDA driver and runtime lies in cuDNN, cuBLAS, cuRAND or NCCL is counted
as third-party (cudnnCreate's allocations that cudnnDestroy never returns, NCCL's probes of kernels built for
other architectures); every other report with a backtrace counts against minidl. Prints the counts as
"third_party=T minidl=M", then one line per distinct third-party report (message without addresses, library,
how often), and every minidl report's message. Exit status 1 when a minidl report exists. The caller compares T
with the sanitizer's own error totals: whatever is not third-party there is minidl's (racecheck's hazards, for
one, come without a host backtrace).
"""
import collections
import re
import sys

THIRD_PARTY = ("libcudnn", "libcublas", "libcurand", "libnccl")
RUNTIME = ("libcuda.so", "libcudart")
HEAD = re.compile(r"^========= (?! )(?!ERROR SUMMARY|RACECHECK SUMMARY|COMPUTE-SANITIZER|LEAK SUMMARY)(.+)$")


def reports(text):
    """Yields (message, frames) for every report in one log."""
    message, frames = None, []
    for line in text.splitlines():
        head = HEAD.match(line)
        if head:
            if message:
                yield message, frames
            message, frames = head.group(1).strip(), []
        elif message and "Host Frame" in line:
            frames.append(line)
        elif message and frames and re.match(r"^=========\s+in ", line):  # the module, on a line of its own
            frames[-1] += line
        elif message and line.strip() == "=========":
            yield message, frames
            message, frames = None, []
    if message:
        yield message, frames


def owner(frames):
    for frame in frames:
        if any(lib in frame for lib in RUNTIME):
            continue
        for lib in THIRD_PARTY:
            if lib in frame:
                return lib
        return None
    return None


def main():
    third_party = collections.Counter()
    ours = []
    for path in sys.argv[1:]:
        with open(path, errors="replace") as f:
            for message, frames in reports(f.read()):
                if not frames:  # a note or a continuation line, not a report with a backtrace
                    continue
                lib = owner(frames)
                if lib:
                    third_party[(re.sub(r"0x[0-9a-f]+", "0x…", message), lib)] += 1
                else:
                    ours.append(f"{path}: {message}")
    print(f"third_party={sum(third_party.values())} minidl={len(ours)}")
    for (message, lib), n in third_party.most_common():
        print(f"  third-party ({lib}) x{n}: {message}")
    for line in ours:
        print(f"  minidl: {line}")
    return 1 if ours else 0


if __name__ == "__main__":
    sys.exit(main())
