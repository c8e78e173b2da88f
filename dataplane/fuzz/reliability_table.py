#!/usr/bin/env python3
"""Rewrites the fuzzing table of RELIABILITY.md from dataplane/fuzz/runs.csv (run.sh --record).

Per target: runs, seconds, executions accumulated over every recorded run, the latest run's
rate, coverage (libFuzzer's cov and ft, the highest seen) and corpus size, crashes, and how far
the executions are from issue 12's goals (10^8 for a parser target, 10^7 for a whole path).
The table sits between two marker lines; the rest of the file is left as it is.
"""
import csv
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
RUNS = os.path.join(HERE, "runs.csv")
DOC = os.path.normpath(os.path.join(HERE, "..", "..", "RELIABILITY.md"))
BEGIN = "<!-- fuzz table: dataplane/fuzz/reliability_table.py -->"
END = "<!-- end of fuzz table -->"
# Whole paths (a connection, an association, the network layer): 10^7; parsers: 10^8.
WHOLE_PATH = {"ddp_conn", "rdmap_conn", "sctp_assoc", "net_interface"}


def main():
    totals = {}
    with open(RUNS) as f:
        for row in csv.DictReader(f):
            t = totals.setdefault(row["target"], {
                "runs": 0, "seconds": 0, "execs": 0, "cov": 0, "ft": 0,
                "corpus": 0, "crashes": 0, "rate": 0, "last": ""})
            secs, execs = int(row["seconds"]), int(row["executions"])
            t["runs"] += 1
            t["seconds"] += secs
            t["execs"] += execs
            t["cov"] = max(t["cov"], int(row["cov"] or 0))
            t["ft"] = max(t["ft"], int(row["ft"] or 0))
            t["corpus"] = int(row["corpus"])
            t["crashes"] += int(row["crashes"])
            t["rate"] = execs // max(secs, 1)
            t["last"] = row["date"]
    lines = [
        BEGIN,
        "| target | runs | seconds | executions | goal | exec/s (last) | cov | ft | corpus | crashes | last run |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in sorted(totals):
        t = totals[name]
        goal = 10**7 if name in WHOLE_PATH else 10**8
        share = f"{t['execs'] / goal:.0%} of 10^{7 if goal == 10**7 else 8}"
        lines.append(
            f"| `{name}` | {t['runs']} | {t['seconds']} | {t['execs']:,} | {share} | "
            f"{t['rate']:,} | {t['cov']} | {t['ft']} | {t['corpus']} | {t['crashes']} | {t['last']} |")
    lines.append(END)
    table = "\n".join(lines)
    with open(DOC) as f:
        doc = f.read()
    if BEGIN not in doc or END not in doc:
        sys.exit(f"{DOC}: no fuzz table markers")
    head, rest = doc.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    with open(DOC, "w") as f:
        f.write(head + table + tail)
    print(f"RELIABILITY.md: fuzz table from {sum(t['runs'] for t in totals.values())} runs")


if __name__ == "__main__":
    main()
