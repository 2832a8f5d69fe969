/**
 * Waiting for a librdkafka queue without blocking the event loop and without spinning.
 *
 * librdkafka writes a byte to a file descriptor of ours when something lands in a queue that
 * was empty (`rd_kafka_queue_io_event_enable`). The read end of that pipe is an ordinary stream
 * to Bun's event loop, so "wait until the queue has something" is an awaited read: no thread
 * blocked inside librdkafka, no timer polling an empty queue. Polling an empty queue in a loop
 * took a whole core on this 2-core machine away from librdkafka's fetcher and the broker
 * (measured: ~200k empty polls a second).
 *
 * Callers wait only after a poll came back empty: an enqueue after that poll finds the queue
 * empty, so its byte is on the way; a byte from before is a harmless early wake-up. Every wait
 * has a deadline as well, so a missed byte costs a delay, never a stall.
 *
 * It is the worker's one waiting point: `wake()` ends the wait in progress too, for what the loop
 * waits on besides records (a flush or DLQ send settled, a replay check answered, a stop).
 */
import { ptr, type Pointer } from "bun:ffi";
import { log } from "../log.ts";
import { libc, O_CLOEXEC, O_NONBLOCK } from "./libc.ts";
import { rdk } from "./native.ts";

const WAKE_BYTE = new Uint8Array([1]);

export class QueueWakeup {
  readonly #queue: Pointer;
  readonly #fds = new Int32Array([-1, -1]);
  #reader: { read(): Promise<unknown>; cancel(): Promise<void> } | null = null;
  #pending: Promise<void> | null = null;
  #wake: (() => void) | null = null;

  constructor(queue: Pointer) {
    this.#queue = queue;
    // Non-blocking both ways: librdkafka's writing thread must never block on a full pipe.
    if (libc.pipe2(ptr(this.#fds), O_NONBLOCK | O_CLOEXEC) !== 0) {
      log.warn("no wake-up pipe for the consumer queue; idle waits fall back to timers");
      return;
    }
    rdk().rd_kafka_queue_io_event_enable(queue, this.#fds[1]!, ptr(WAKE_BYTE), 1);
    this.#reader = Bun.file(this.#fds[0]!).stream().getReader();
  }

  /** Resolves when the queue may have something, at `wake()`, or after `timeoutMs`, whichever comes first. */
  wait(timeoutMs: number): Promise<void> {
    const reader = this.#reader;
    let timer: Timer | undefined;
    let wake!: () => void;
    const ends = [
      new Promise<void>((resolve) => (wake = resolve)),
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, timeoutMs);
      }),
    ];
    this.#wake = wake;
    // One read outstanding at a time; a wait that ended otherwise leaves it for the next one.
    if (reader !== null)
      ends.push(
        (this.#pending ??= reader.read().then(
          () => {
            this.#pending = null;
          },
          () => {
            this.#pending = null;
          },
        )),
      );
    return Promise.race(ends).finally(() => {
      clearTimeout(timer);
      if (this.#wake === wake) this.#wake = null;
    });
  }

  /** Ends the wait in progress, if any. */
  wake(): void {
    this.#wake?.();
  }

  /** Stops the events and closes the pipe; call before the queue is destroyed. */
  close(): void {
    if (this.#fds[0]! < 0) return;
    rdk().rd_kafka_queue_io_event_enable(this.#queue, -1, null, 0);
    libc.close(this.#fds[1]!);
    // Cancelling settles a pending read. The stream leaves the descriptor open; it is closed once
    // the stream has let go of it, so the event loop never watches a reused number.
    const readEnd = this.#fds[0]!;
    const reader = this.#reader;
    this.#reader = null;
    this.#fds.fill(-1);
    if (reader === null) libc.close(readEnd);
    else
      void reader
        .cancel()
        .catch(() => {})
        .finally(() => libc.close(readEnd));
  }
}
