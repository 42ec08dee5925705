#!/usr/bin/env python3
"""Write a synthetic `iostat -x -t -k` log (sysstat 12.3+ layout, avg-cpu
blocks, four devices, one report per second) of at least SIZE bytes, for
measuring fslab's iostat parser on long logs:

    scripts/gen-iostat-log.py 1G /var/tmp/big-iostat.log

Deterministic (fixed seed); timestamps cross midnight every 86,400 reports.
"""
import random
import sys

COLS = ["r/s", "rkB/s", "rrqm/s", "%rrqm", "r_await", "rareq-sz", "w/s", "wkB/s", "wrqm/s", "%wrqm",
        "w_await", "wareq-sz", "d/s", "dkB/s", "drqm/s", "%drqm", "d_await", "dareq-sz", "f/s", "f_await",
        "aqu-sz", "%util"]
DEVICES = ["mmcblk0", "nvme0n1", "sda", "sdb"]


def size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(text[:-1]) * units[text[-1].upper()]) if text[-1].upper() in units else int(text)


def main():
    want, path = size(sys.argv[1]), sys.argv[2]
    rng = random.Random(1)
    header = "Device          " + "".join(f" {c:>9}" for c in COLS) + "\n"
    written = 0
    t = 9 * 3600
    with open(path, "w") as out:
        out.write("Linux 5.19.0-rpi (raspberrypi) \t08/25/22 \t_aarch64_\t(4 CPU)\n\n")
        while written < want:
            h, m, s = (t // 3600) % 24, (t // 60) % 60, t % 60
            block = [f"08/25/22 {h:02d}:{m:02d}:{s:02d}\n",
                     "avg-cpu:  %user   %nice %system %iowait  %steal   %idle\n",
                     "          %6.2f    0.00  %6.2f  %6.2f    0.00  %6.2f\n\n" % (
                         rng.uniform(0, 50), rng.uniform(0, 20), rng.uniform(0, 30), rng.uniform(0, 40)),
                     header]
            for d in DEVICES:
                busy = rng.random() < 0.5
                vals = [rng.uniform(0, 500) if busy else 0.0 for _ in COLS]
                vals[-1] = rng.uniform(95, 100) if busy else rng.uniform(0, 5)
                block.append(f"{d:<16}" + "".join(f" {v:>9.2f}" for v in vals) + "\n")
            block.append("\n")
            text = "".join(block)
            out.write(text)
            written += len(text)
            t += 1


main()
