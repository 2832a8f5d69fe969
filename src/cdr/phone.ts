/**
 * caller_num → E.164 msisdn with libphonenumber-js's full metadata (validity, not just length),
 * behind a bounded cache: phone parsing is the most expensive step and callers repeat a lot.
 */
import { parsePhoneNumberFromString, type CountryCode } from "libphonenumber-js/max";

export interface PhoneNormalizerOptions {
  /** Region for numbers without an international prefix; without it such numbers are invalid. */
  defaultRegion?: CountryCode;
  /** Most verdicts kept; 0 disables the cache. */
  cacheSize?: number;
}

export class PhoneNormalizer {
  readonly #region: CountryCode | undefined;
  readonly #capacity: number;
  readonly #cache = new Map<string, string | null>();
  hits = 0;
  misses = 0;

  constructor(opts: PhoneNormalizerOptions = {}) {
    this.#region = opts.defaultRegion;
    this.#capacity = opts.cacheSize ?? 100_000;
  }

  /** The E.164 form of `raw`, or null when it is not a valid number. */
  normalize(raw: string): string | null {
    const cached = this.#cache.get(raw);
    if (cached !== undefined) {
      this.hits++;
      return cached;
    }
    this.misses++;
    const verdict = this.#parse(raw);
    if (this.#capacity > 0) {
      // FIFO eviction: cheaper than LRU bookkeeping on every hit, and hot callers come straight back.
      if (this.#cache.size >= this.#capacity) this.#cache.delete(this.#cache.keys().next().value!);
      this.#cache.set(raw, verdict);
    }
    return verdict;
  }

  get size(): number {
    return this.#cache.size;
  }

  #parse(raw: string): string | null {
    const s = raw.trim();
    let international: string | null = null;
    if (s.startsWith("+")) international = s;
    else if (s.startsWith("00")) international = "+" + s.slice(2);
    else if (s.startsWith("011")) international = "+" + s.slice(3);
    const parsed = international !== null
      ? parsePhoneNumberFromString(international)
      : this.#region ? parsePhoneNumberFromString(s, this.#region) : undefined;
    return parsed && parsed.isValid() ? parsed.number : null;
  }
}
