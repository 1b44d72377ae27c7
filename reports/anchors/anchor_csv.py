"""What every anchor script shares: rows appended to a CSV as they are
measured (header written when the file is new or empty, else checked),
each ending in the torch version and the UTC time, and echoed to stdout,
so a run cut short keeps every row it finished."""
import datetime
import os

import torch


class AnchorCSV:
    def __init__(self, path, columns):
        new = not os.path.exists(path) or os.path.getsize(path) == 0
        header = ",".join(columns + ["torch", "utc"])
        if not new:
            with open(path, encoding="ascii") as f:
                have = f.readline().rstrip("\n")
            if have != header:
                raise SystemExit(f"{path}: its header is\n  {have}\nthis script writes\n"
                                 f"  {header}\n(another script's file, or an older one: "
                                 "give a new file)")
        self.f = open(path, "a", encoding="ascii")
        if new:
            self.f.write(header + "\n")

    def row(self, *cells):
        utc = datetime.datetime.now(datetime.timezone.utc).strftime(
            "%Y-%m-%dT%H:%M:%SZ")
        line = ",".join(str(c) for c in cells + (torch.__version__, utc))
        print(line, flush=True)
        self.f.write(line + "\n")
        self.f.flush()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()
