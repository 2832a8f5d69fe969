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

  /** How many decimal digits an integer in 0…2^32−1 has. */
  protected static width(v: number): number {
    let width = 1;
    for (let t = v; t >= 10; t = Math.floor(t / 10)) width++;
    return width;
  }

  /** Decimal digits of an integer in 0…2^32−1 at `length`; room already reserved. */
  protected digits(v: number): void {
    const b = this.buf;
    let p = this.length + ByteBuffer.width(v);
    this.length = p;
    while (v >= 10) {
      const q = Math.floor(v / 10);
      b[--p] = 0x30 + (v - q * 10);
      v = q;
    }
    b[--p] = 0x30 + v;
  }

  /** Room for `n` more bytes at `length`. */
  protected reserve(n: number): void {
    if (this.length + n <= this.buf.length) return;
    const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.length + n));
    this.buf.copy(next, 0, 0, this.length);
    this.buf = next;
  }
}
