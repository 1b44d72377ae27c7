"""What every anchor script shares: rows appended to a CSV as they are
measured (header written when the file is new or empty, else checked),
each ending in the torch version and the UTC time, and echoed to stdout,
so a run cut short keeps every row it finished; and, for a script's
--resume, whether the file already answers a configuration."""
import csv
import datetime
import os

import torch

# Statuses that answer a configuration: measuring it again would say the
# same (an error may be transient: --resume tries it again).
ANSWERS = ("ok", "oom", "unsupported")


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
        self.columns = columns
        self.answered = []   # the rows that answer a configuration (ANSWERS)
        if not new:
            with open(path, encoding="ascii", newline="") as f:
                self.answered = [r for r in csv.DictReader(f)
                                 if r.get("status") in ANSWERS]
        self.f = open(path, "a", encoding="ascii")
        if new:
            self.f.write(header + "\n")

    def answers(self, **key):
        """Whether a row of the file (or of this run) with these column
        values has a status in ANSWERS: what --resume skips. Values compare
        as text, as row() writes them."""
        return any(all(r.get(k) == str(v) for k, v in key.items())
                   for r in self.answered)

    def row(self, *cells):
        utc = datetime.datetime.now(datetime.timezone.utc).strftime(
            "%Y-%m-%dT%H:%M:%SZ")
        line = ",".join(str(c) for c in cells + (torch.__version__, utc))
        print(line, flush=True)
        self.f.write(line + "\n")
        self.f.flush()
        r = dict(zip(self.columns, (str(c) for c in cells)))
        if r.get("status") in ANSWERS:
            self.answered.append(r)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()
