/** The few libc functions the Kafka binding calls directly, bound once. */
import { dlopen } from "bun:ffi";

export const libc = dlopen("libc.so.6", {
  // Copying a poll's payloads into one slab: one FFI call per message and no JS allocation
  // besides the view (toArrayBuffer + slice made two objects and a copy each).
  memcpy: { args: ["ptr", "ptr", "usize"], returns: "ptr" },
  // The wake-up pipe librdkafka writes to when a queue gets something (queue-wakeup.ts).
  pipe2: { args: ["ptr", "i32"], returns: "i32" },
  close: { args: ["i32"], returns: "i32" },
  // A commit's metadata string: librdkafka frees it with the list (rd_free), so it is malloc'd.
  malloc: { args: ["usize"], returns: "ptr" },
}).symbols;

export const O_NONBLOCK = 0o4000;
export const O_CLOEXEC = 0o2000000;
