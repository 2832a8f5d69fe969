/** The few libc functions the worker calls directly, bound once. */
import { dlopen, ptr } from "bun:ffi";
import { exitNow } from "../exits.ts";

export const libc = dlopen("libc.so.6", {
  // Copying a poll's payloads into one slab: one FFI call per message and no JS allocation
  // besides the view (toArrayBuffer + slice made two objects and a copy each).
  memcpy: { args: ["ptr", "ptr", "usize"], returns: "ptr" },
  // Header names' lengths in the native batch copy (batch-copy.ts): only its address is used.
  strlen: { args: ["ptr"], returns: "usize" },
  // The wake-up pipe librdkafka writes to when a queue gets something (queue-wakeup.ts).
  pipe2: { args: ["ptr", "i32"], returns: "i32" },
  close: { args: ["i32"], returns: "i32" },
  // A commit's metadata string: librdkafka frees it with the list (rd_free), so it is malloc'd.
  malloc: { args: ["usize"], returns: "ptr" },
  // The core file size limit (coreDumps below).
  getrlimit: { args: ["i32", "ptr"], returns: "i32" },
  setrlimit: { args: ["i32", "ptr"], returns: "i32" },
  // A child that ends with its parent (endWithParent below).
  prctl: { args: ["i32", "u64", "u64", "u64", "u64"], returns: "i32" },
  getppid: { args: [], returns: "i32" },
  // A thread of its own for each blocking transactional call (txn-thread.ts): only their addresses are used.
  pthread_create: { args: ["ptr", "ptr", "ptr", "ptr"], returns: "i32" },
  pthread_detach: { args: ["u64"], returns: "i32" },
  // librdkafka's clock (rd_clock: CLOCK_MONOTONIC), to place its statistics on performance.now's.
  clock_gettime: { args: ["i32", "ptr"], returns: "i32" },
  // Where malloc takes large blocks from (largeBlocksMapped below).
  mallopt: { args: ["i32", "i32"], returns: "i32" },
}).symbols;

/** <time.h> CLOCK_MONOTONIC on Linux; struct timespec { time_t tv_sec; long tv_nsec; }. */
const CLOCK_MONOTONIC = 1;

/** librdkafka's clock now (rd_clock: CLOCK_MONOTONIC), in µs. */
export function rdClockUs(): number {
  const ts = new BigInt64Array(2);
  libc.clock_gettime(CLOCK_MONOTONIC, ptr(ts));
  return Number(ts[0]) * 1e6 + Number(ts[1]) / 1e3;
}

/** <sys/resource.h>: RLIMIT_CORE on Linux; struct rlimit { rlim_t rlim_cur; rlim_t rlim_max; }. */
const RLIMIT_CORE = 4;

/**
 * Core dumps off, or back to the soft limit the process started with. A core holds the process's
 * memory: credentials from the environment, CDRs with phone numbers. Off is set first thing at
 * start; the operator who wants cores asks with CORE_DUMPS=on. Only the soft limit changes: the
 * hard one stays, so the limit can be raised again (and a child, such as the scheduled audit,
 * inherits the same). Returns false when libc refused.
 */
export const coreDumps = {
  started: null as BigUint64Array | null,
  off(): boolean {
    const lim = new BigUint64Array(2);
    if (libc.getrlimit(RLIMIT_CORE, ptr(lim)) !== 0) return false;
    this.started ??= lim.slice();
    lim[0] = 0n;
    return libc.setrlimit(RLIMIT_CORE, ptr(lim)) === 0;
  },
  restore(): boolean {
    return this.started === null || libc.setrlimit(RLIMIT_CORE, ptr(this.started)) === 0;
  },
};

/** <malloc.h> M_MMAP_THRESHOLD. */
const M_MMAP_THRESHOLD = -3;
/** The size from which a block is mapped on its own, and unmapped when freed. */
export const LARGE_BLOCK_BYTES = 1024 * 1024;

/**
 * Every block of LARGE_BLOCK_BYTES or more malloc'd on its own mapping, given back to the kernel
 * when freed. librdkafka takes each fetch response (up to 16 MiB) and each decompressed batch from
 * malloc; glibc maps the first such block, and once it is freed raises its threshold to that size,
 * so the next ones come from the heap of whichever librdkafka thread asked, and stay resident after
 * free. Under CPU contention that held 45 records of 15 MiB at 201–288 MiB of RSS where a fixed
 * threshold held them at 149–169 MiB (test/e2e/memory-bound.test.ts beside two busy loops, three
 * runs each). Setting the threshold also ends glibc's moving of it. Returns false when libc refused.
 */
export function largeBlocksMapped(): boolean {
  return libc.mallopt(M_MMAP_THRESHOLD, LARGE_BLOCK_BYTES) === 1;
}

/** <linux/prctl.h> PR_SET_PDEATHSIG; <signal.h> SIGTERM. */
const PR_SET_PDEATHSIG = 1;
const SIGTERM = 15;

/**
 * Asks the kernel for SIGTERM when the parent ends, however it ends (SIGKILL included): a child the
 * worker starts (the scheduled audit) must not outlive it. A parent already gone before the ask
 * (getppid is no longer `parent`) ends this process at once. Returns false when libc refused.
 */
export function endWithParent(parent: number): boolean {
  if (libc.prctl(PR_SET_PDEATHSIG, BigInt(SIGTERM), 0n, 0n, 0n) !== 0) return false;
  if (libc.getppid() !== parent) exitNow("PARENT_GONE");
  return true;
}

export const O_NONBLOCK = 0o4000;
export const O_CLOEXEC = 0o2000000;
