/**
 * Synthetic vendor CDRs for the demo, the benchmarks and the tests: realistic callers (a Zipf-like
 * repeat pattern over a fixed population), and a configurable share of each defect kind.
 * Deterministic for a given seed.
 */

export const DEFECTS = [
  "malformed_json",
  "missing_field",
  "invalid_rat",
  "inverted_epoch",
  "negative_bytes",
  "bad_phone",
  "bad_ip",
] as const;
export type Defect = (typeof DEFECTS)[number];

export interface SyntheticOptions {
  seed?: number;
  /** Distinct callers; 0 makes every caller new. */
  callers?: number;
  /** Share of records that carry a defect, 0…1, spread evenly over `defects`. */
  invalidShare?: number;
  defects?: readonly Defect[];
  /** Prefix of raw_id, so runs do not collide. */
  idPrefix?: string;
  /** epoch_start base (seconds); records spread over the hour before it. */
  now?: number;
}

export interface SyntheticRecord {
  text: string;
  defect: Defect | null;
}

// Number plans whose ranges libphonenumber's full metadata accepts as valid.
const PLANS: Array<{ cc: string; prefix: string; digits: number; idd: "00" | "011" }> = [
  { cc: "49", prefix: "151", digits: 8, idd: "00" }, // DE mobile
  { cc: "33", prefix: "6", digits: 8, idd: "00" }, // FR mobile
  { cc: "44", prefix: "7400", digits: 6, idd: "00" }, // GB mobile
  { cc: "1", prefix: "201555", digits: 4, idd: "011" }, // US
  { cc: "39", prefix: "347", digits: 7, idd: "00" }, // IT mobile
  { cc: "34", prefix: "612", digits: 6, idd: "00" }, // ES mobile
];
const SERVICES = ["voice", "sms", "data", "volte"];
const RATS = [1, 6, 9];

/** mulberry32: small, fast, good enough for test data (the fuzz tests use it too). */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export class SyntheticCdrs {
  readonly #rand: () => number;
  readonly #callers: number;
  readonly #invalidShare: number;
  readonly #defects: readonly Defect[];
  readonly #prefix: string;
  readonly #now: number;
  #seq = 0;

  constructor(opts: SyntheticOptions = {}) {
    this.#rand = rng(opts.seed ?? 42);
    this.#callers = opts.callers ?? 100_000;
    this.#invalidShare = opts.invalidShare ?? 0.03;
    this.#defects = opts.defects ?? DEFECTS;
    this.#prefix = opts.idPrefix ?? "syn";
    this.#now = opts.now ?? Math.floor(Date.now() / 1000);
  }

  next(): SyntheticRecord {
    const r = this.#rand;
    const seq = this.#seq++;
    const defect =
      this.#defects.length > 0 && r() < this.#invalidShare
        ? this.#defects[Math.floor(r() * this.#defects.length)]!
        : null;
    const start = this.#now - Math.floor(r() * 3600);
    const rec: Record<string, unknown> = {
      raw_id: `${this.#prefix}-${seq}`,
      device_id: `35${String(Math.floor(r() * 1e13)).padStart(13, "0")}`,
      caller_num: this.#caller(),
      svc: SERVICES[Math.floor(r() * SERVICES.length)],
      rat: RATS[Math.floor(r() * RATS.length)],
      epoch_start: start,
      epoch_end: start + Math.floor(r() * 3600),
      up_bytes: Math.floor(r() * 5e7),
      down_bytes: Math.floor(r() * 5e8),
      lac: 1 + Math.floor(r() * 65534),
      ci: 1 + Math.floor(r() * 268435454),
    };
    if (r() < 0.8) rec.source_ip = `10.${Math.floor(r() * 256)}.${Math.floor(r() * 256)}.${1 + Math.floor(r() * 254)}`;
    switch (defect) {
      case "malformed_json":
        return { text: JSON.stringify(rec).slice(0, 40), defect };
      case "missing_field":
        delete rec.device_id;
        break;
      case "invalid_rat":
        rec.rat = 4;
        break;
      case "inverted_epoch":
        rec.epoch_end = start - 10;
        break;
      case "negative_bytes":
        rec.up_bytes = -1;
        break;
      case "bad_phone":
        rec.caller_num = "+49123";
        break;
      case "bad_ip":
        rec.source_ip = "300.1.2.3";
        break;
    }
    return { text: JSON.stringify(rec), defect };
  }

  #caller(): string {
    const r = this.#rand;
    // log-uniform index ≈ Zipf(s=1): a few callers are very frequent, most are rare.
    const idx = this.#callers > 0 ? Math.floor(Math.exp(r() * Math.log(this.#callers + 1))) - 1 : this.#seq + 1_000_000;
    const plan = PLANS[idx % PLANS.length]!;
    const local = String(Math.floor(idx / PLANS.length) % 10 ** plan.digits).padStart(plan.digits, "0");
    const national = plan.cc + plan.prefix + local;
    // Vendors write the same number in different ways.
    const form = idx % 3;
    return form === 0 ? `+${national}` : `${plan.idd}${national}`;
  }
}
