/** Dotted-quad IPv4 text → the UInt32 ClickHouse stores (18.16 has no IPv4 type). */

const DOT = 0x2e;
const ZERO = 0x30;
const NINE = 0x39;
// The text of a string, as character codes, for the one parser below: 15 characters at most.
const scratch = new Uint8Array(15);

/** Returns the address as an unsigned 32-bit number, or -1 when the text is not a strict dotted quad. */
export function parseIPv4(s: string): number {
  const len = s.length;
  if (len < 7 || len > 15) return -1;
  for (let i = 0; i < len; i++) {
    const c = s.charCodeAt(i);
    if (c > 0x7f) return -1; // the byte array would keep only its low bits
    scratch[i] = c;
  }
  return parseIPv4Bytes(scratch, 0, len);
}

/** parseIPv4() of the ASCII text at [s, e) of `b` (a payload's bytes, record-scan.ts). */
export function parseIPv4Bytes(b: Uint8Array, s: number, e: number): number {
  const len = e - s;
  if (len < 7 || len > 15) return -1;
  let value = 0;
  let octet = 0;
  let digits = 0;
  let dots = 0;
  for (let i = s; i < e; i++) {
    const c = b[i]!;
    if (c === DOT) {
      if (digits === 0 || ++dots > 3) return -1;
      value = value * 256 + octet;
      octet = 0;
      digits = 0;
    } else if (c >= ZERO && c <= NINE) {
      // A leading zero ("010") is refused: some parsers read it as octal, so its meaning is unclear.
      if (digits === 1 && octet === 0) return -1;
      octet = octet * 10 + (c - ZERO);
      if (octet > 255 || ++digits > 3) return -1;
    } else return -1;
  }
  if (dots !== 3 || digits === 0) return -1;
  return value * 256 + octet;
}
