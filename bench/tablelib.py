"""tablelib.py -- what the bench/*_table.py scripts share: reading a run's JSON files and
writing the results table. Standard library only."""

import json
import os
import sys


def load(path, note_missing=False):
    """The parsed file, or None: a missing file (noted on stderr with note_missing) or
    one that cannot be read or parsed (always noted, naming the script and the file)."""
    prog = os.path.basename(sys.argv[0])
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        if note_missing:
            print(f"{prog}: {path}: not found, left out", file=sys.stderr)
    except (OSError, ValueError) as e:
        print(f"{prog}: {path}: cannot read: {e}", file=sys.stderr)
    return None


def write_table(outdir, text):
    """Prints the table and writes it to OUTDIR/table.md, through a temporary file so
    that a failed write leaves the previous table whole."""
    sys.stdout.write(text)
    path = os.path.join(outdir, "table.md")
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)
