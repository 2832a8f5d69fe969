/**
 * librdkafka's blocking transactional calls, each made on a thread of its own, so the event loop
 * never waits for the transaction coordinator. send_offsets_to_transaction in particular waits for
 * its requests whatever timeout it is given (the coordinator's AddOffsetsToTxn answer, up to
 * transaction.timeout.ms): on the event loop that held /healthz, the shutdown timer and every
 * delivery report while a broker did not answer.
 *
 * A small C routine compiled at start by Bun's TinyCC, as batch-copy.ts is: it starts a detached
 * pthread that makes the call and then sets a flag, which the event loop polls every millisecond.
 * It calls librdkafka and libc only through function pointers bun:ffi already resolved. librdkafka
 * is thread-safe and these calls are meant for an application thread; delivery reports stay on the
 * event loop, which serves them meanwhile (a commit's flush waits for them). When TinyCC is
 * unavailable, `loadTxnThread()` returns null and the calls are made on the event loop in slices.
 */
import { ptr, type Pointer } from "bun:ffi";
import { log } from "../log.ts";
import { libc } from "./libc.ts";
import { compileC } from "./tinycc.ts";

const SOURCE = `
typedef void *(*call2_t)(void *, int);
typedef void *(*call4_t)(void *, void *, void *, int);
typedef int (*create_t)(unsigned long *, void *, void *(*)(void *), void *);
typedef int (*detach_t)(unsigned long);

/* Laid out as eight 64-bit words, written and read by the event loop (JOB below). */
struct job { void *fn; void *rk; void *a; void *b; long timeout; long arity; void *result; volatile long done; };

static void *run(void *p) {
  struct job *j = (struct job *)p;
  if (j->arity == 4) j->result = ((call4_t)j->fn)(j->rk, j->a, j->b, (int)j->timeout);
  else j->result = ((call2_t)j->fn)(j->rk, (int)j->timeout);
  /* x86-64 keeps stores in order: the result is visible before the flag. */
  j->done = 1;
  return 0;
}

int txn_start(struct job *j, void *create, void *detach) {
  unsigned long th;
  int r = ((create_t)create)(&th, 0, run, j);
  if (r == 0) ((detach_t)detach)(th);
  return r;
}
`;

/** Word indices of `struct job`. */
const JOB = { fn: 0, rk: 1, a: 2, b: 3, timeout: 4, arity: 5, result: 6, done: 7 } as const;

export interface TxnThread {
  /**
   * Calls `fn` (an rd_kafka_* transactional function's address) with `args` on a thread of its own;
   * resolves with what it returned (an rd_kafka_error_t*, or null) once it has.
   */
  call(
    fn: Pointer,
    rk: Pointer,
    timeoutMs: number,
    args: { a?: Pointer; b?: Pointer; tick?: () => void },
  ): Promise<Pointer | null>;
}

let loaded: TxnThread | null | undefined;
// Each job stays referenced while its thread writes into it.
const keepAlive: unknown[] = [];

export function loadTxnThread(): TxnThread | null {
  if (loaded !== undefined) return loaded;
  loaded = null;
  try {
    const compiled = compileC("txn-thread", SOURCE, { txn_start: { args: ["ptr", "ptr", "ptr"], returns: "i32" } });
    const create = (libc.pthread_create as unknown as { ptr: Pointer }).ptr;
    const detach = (libc.pthread_detach as unknown as { ptr: Pointer }).ptr;
    const start = compiled.symbols.txn_start;
    loaded = {
      async call(fn, rk, timeoutMs, { a, b, tick }) {
        const job = new BigUint64Array(8);
        job[JOB.fn] = BigInt(fn);
        job[JOB.rk] = BigInt(rk);
        job[JOB.a] = BigInt(a ?? 0);
        job[JOB.b] = BigInt(b ?? 0);
        job[JOB.timeout] = BigInt(Math.max(1, Math.ceil(timeoutMs)));
        job[JOB.arity] = a === undefined ? 2n : 4n;
        // The thread writes into `job` until it sets done: it stays referenced until then.
        keepAlive.push(job);
        try {
          const r = start(ptr(job), create, detach);
          if (r !== 0) throw new Error(`pthread_create: ${r}`);
          while (job[JOB.done] === 0n) {
            tick?.();
            await Bun.sleep(1);
          }
          const result = Number(job[JOB.result]);
          return result === 0 ? null : (result as Pointer);
        } finally {
          if (job[JOB.done] !== 0n) keepAlive.splice(keepAlive.indexOf(job), 1);
        }
      },
    };
  } catch (cause) {
    log.warn("kafka: transactional calls on the event loop (no thread of their own)", {
      cause: (cause as Error).message,
    });
  }
  return loaded;
}
