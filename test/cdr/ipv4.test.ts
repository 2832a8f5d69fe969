import { expect, setDefaultTimeout, test } from "bun:test";
import { parseIPv4 } from "../../src/cdr/ipv4.ts";

setDefaultTimeout(60_000);

test.each([
  ["0.0.0.0", 0],
  ["10.1.2.3", 167838211],
  ["255.255.255.255", 4294967295],
  ["192.168.0.1", 3232235521],
])("parses %s", (text, n) => {
  expect(parseIPv4(text)).toBe(n);
});

test.each(["", "1.2.3", "1.2.3.4.5", "256.1.1.1", "1..2.3", "01.2.3.4", "1.2.3.4 ", "a.b.c.d", "1.2.3.-4", "1234.1.1.1", "::1", "1.2.3."])(
  "rejects %p",
  (text) => {
    expect(parseIPv4(text)).toBe(-1);
  },
);
