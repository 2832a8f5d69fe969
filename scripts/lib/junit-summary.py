"""The test command's verdict from the JUnit reports its passes wrote: each failed test by name with
its first lines (so a log's tail says what broke), then `N passed, M failed` over every pass.
`--totals` prints the last line alone. Exit status 1 when a test failed, none ran, or no report
was written."""
import sys
import xml.etree.ElementTree as ET

args = sys.argv[1:]
totals_only = "--totals" in args
reports = [a for a in args if a != "--totals"]
cases = []
unread = 0
for f in reports:
    try:
        cases += [(f, c) for c in ET.parse(f).getroot().iter("testcase")]
    except (OSError, ET.ParseError) as e:
        # A pass whose report cannot be read may have failed anything: it counts as a failure.
        unread += 1
        print(f"report {f} not read: {e}")
failed = [(f, c) for f, c in cases if c.find("failure") is not None or c.find("error") is not None]
skipped = sum(1 for _, c in cases if c.find("skipped") is not None)
if not totals_only:
    for f, c in failed:
        bad = c.find("failure") if c.find("failure") is not None else c.find("error")
        print(f"FAILED {c.get('classname', '')} > {c.get('name')} ({f})")
        text = (bad.get("message") or "") + "\n" + (bad.text or "")
        for line in [l for l in text.splitlines() if l.strip()][:40]:
            print(f"    {line[:1000]}")
    if not reports:
        print("no JUnit report was written")
passed = len(cases) - len(failed) - skipped
# No report at all counts as a failure: nothing ran that could pass.
failures = len(failed) + unread + (0 if reports else 1)
print(f"{passed} passed, {failures} failed")
sys.exit(1 if failures or passed == 0 else 0)
