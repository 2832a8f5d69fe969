/**
 * A reusable byte buffer that an insert body is written into row by row: it grows by doubling and,
 * after a batch of large records, gives back what the peak took once batches are small again.
 * The row encoders (row-binary.ts, row-encoder.ts) write into `buf` at `length`.
 */
const INITIAL_BYTES = 64 * 1024;
const SHRINK_ABOVE = 1 << 20;

export class ByteBuffer {
  buf: Buffer;
  length = 0;

  constructor(initialBytes = INITIAL_BYTES) {
    this.buf = Buffer.allocUnsafe(initialBytes);
  }

  /** The bytes written so far (a view: valid until the next write or reset). */
  bytes(): Uint8Array {
    return this.buf.subarray(0, this.length);
  }

  /** Empties the buffer; one grown past SHRINK_ABOVE is replaced once a batch uses under a quarter of it. */
  reset(): void {
    if (this.buf.length > SHRINK_ABOVE && this.length < this.buf.length / 4)
      this.buf = Buffer.allocUnsafe(Math.max(INITIAL_BYTES, this.length * 2));
    this.length = 0;
  }

  /** Room for `n` more bytes at `length`. */
  protected reserve(n: number): void {
    if (this.length + n <= this.buf.length) return;
    const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.length + n));
    this.buf.copy(next, 0, 0, this.length);
    this.buf = next;
  }
}
