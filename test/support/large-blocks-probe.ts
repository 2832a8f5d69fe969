// Run as its own process (test/kafka/large-blocks.test.ts): a fresh malloc whose threshold nothing
// has moved yet. Prints the resident bytes a second 16 MiB block, touched and freed, leaves behind.
import { dlopen, toArrayBuffer } from "bun:ffi";
import { largeBlocksMapped } from "../../src/kafka/libc.ts";

const c = dlopen("libc.so.6", {
  malloc: { args: ["usize"], returns: "ptr" },
  free: { args: ["ptr"], returns: "void" },
}).symbols;
const SIZE = 16 * 1024 * 1024;

function rss(): number {
  const m = require("node:fs").readFileSync("/proc/self/status", "utf8").match(/VmRSS:\s+(\d+) kB/);
  return Number(m[1]) * 1024;
}

function touchAndFree(): void {
  const p = c.malloc(SIZE)!;
  new Uint8Array(toArrayBuffer(p, 0, SIZE)).fill(1);
  c.free(p);
}

if (process.argv[2] === "mapped" && !largeBlocksMapped()) throw new Error("mallopt refused");
touchAndFree(); // as librdkafka's first fetch response
const before = rss();
touchAndFree(); // the next
console.log(rss() - before);
