/**
 * The character codes the JSON scanners compare with: the same numbers in a string's
 * charCodeAt() (flat-json.ts, json.ts) and in a payload's UTF-8 bytes (record-scan.ts).
 */
export const QUOTE = 0x22;
export const BACKSLASH = 0x5c;
export const COMMA = 0x2c;
export const COLON = 0x3a;
export const OPEN = 0x7b;
export const CLOSE = 0x7d;
export const MINUS = 0x2d;
export const PLUS = 0x2b;
export const DOT = 0x2e;
export const ZERO = 0x30;
export const NINE = 0x39;
export const SPACE = 0x20;
