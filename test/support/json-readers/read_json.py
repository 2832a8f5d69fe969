# Reads a JSON array of texts on stdin; prints a JSON array with, for each text, what Python's json
# module at its defaults says of it: "" when it parses, else the error.
import json
import sys

texts = json.load(sys.stdin)
out = []
for t in texts:
    try:
        json.loads(t)
        out.append("")
    except (ValueError, RecursionError) as e:
        out.append(f"{type(e).__name__}: {str(e)[:200]}")
json.dump(out, sys.stdout)
