/**
 * The validation rules written the plain way, as the reference the fuzzer holds decode() against
 * (test/fuzz/): JSON.parse with a reviver for exact integers, the valibot schema for types and
 * ranges, Python phonenumbers' verdicts (test/fixtures/phone-verdicts.json) for caller_num, and
 * RFC 4122's UUIDv5 over node:crypto's SHA-1. None of decode()'s fast paths (flat-json.ts,
 * field-checks.ts, the phone cache, Bun's UUIDv5) is used here.
 *
 * The reviver recurses: on deep nesting the reference itself overflows, and says so ("unknown").
 */
import { createHash } from "node:crypto";
import { RAT_NAMES, REQUIRED_FIELDS, UINT64_MAX } from "../../src/cdr/fields.ts";
import { firstTypeIssue } from "../../src/cdr/schema.ts";
import verdicts from "../fixtures/phone-verdicts.json";

/** What the rules make of a record: the row's columns as text, a rejection, or no verdict. */
export type Reference =
  | { ok: true; row: Record<string, string> }
  | { ok: false; reason: string; field: string | null }
  | { unknown: string };

const PHONES = new Map<string, string | null>(verdicts.cases.map((c) => [c.caller_num, c.msisdn]));
/** caller_num values whose verdict the reference knows. */
export const KNOWN_CALLER_NUMS: readonly string[] = [...PHONES.keys()];

const OCTET = "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])";
const IPV4 = new RegExp(`^${OCTET}\\.${OCTET}\\.${OCTET}\\.${OCTET}$`);

export function referenceDecode(bytes: Uint8Array): Reference {
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    return { ok: false, reason: "malformed_json", field: null };
  }
  let value: unknown;
  try {
    value = JSON.parse(text, (_k, v, ctx?: { source?: string }) =>
      typeof v === "number" && !Number.isSafeInteger(v) && /^-?\d+$/.test(ctx?.source ?? "") ? BigInt(ctx!.source!) : v,
    );
  } catch (e) {
    if (e instanceof RangeError) return { unknown: "the reference's reviver overflowed" };
    return { ok: false, reason: "malformed_json", field: null };
  }
  if (value === null || typeof value !== "object" || Array.isArray(value))
    return { ok: false, reason: "malformed_json", field: null };
  const r = value as Record<string, unknown>;
  for (const f of REQUIRED_FIELDS) {
    const v = r[f];
    if (v === undefined || v === null || (typeof v === "string" && v.trim() === ""))
      return { ok: false, reason: "missing_required_field", field: f };
  }
  const issue = firstTypeIssue(r);
  if (issue) {
    const reason = issue.field === "rat" ? "invalid_rat_value" : ["epoch_start", "epoch_end"].includes(issue.field) ? "invalid_epoch" : "normalization_error";
    return { ok: false, reason, field: issue.field };
  }
  const rat = RAT_NAMES[r.rat as number];
  if (rat === undefined) return { ok: false, reason: "invalid_rat_value", field: "rat" };
  const start = BigInt(r.epoch_start as number | bigint);
  const end = BigInt(r.epoch_end as number | bigint);
  if (start > end) return { ok: false, reason: "invalid_epoch", field: "epoch_start" };
  const up = BigInt(r.up_bytes as number | bigint);
  const down = BigInt(r.down_bytes as number | bigint);
  if (up < 0n) return { ok: false, reason: "normalization_error", field: "up_bytes" };
  if (down < 0n) return { ok: false, reason: "normalization_error", field: "down_bytes" };
  if (up + down > UINT64_MAX) return { ok: false, reason: "normalization_error", field: "total_bytes" };
  const caller = r.caller_num as string;
  if (!PHONES.has(caller)) return { unknown: `no phone verdict for ${JSON.stringify(caller)}` };
  const msisdn = PHONES.get(caller)!;
  if (msisdn === null) return { ok: false, reason: "normalization_error", field: "caller_num" };
  const ip = r.source_ip as string | null | undefined;
  let ipNumber = 0;
  if (ip !== undefined && ip !== null && ip !== "") {
    const m = IPV4.exec(ip);
    if (!m) return { ok: false, reason: "normalization_error", field: "source_ip" };
    ipNumber = ((+m[1]! * 256 + +m[2]!) * 256 + +m[3]!) * 256 + +m[4]!;
  }
  return {
    ok: true,
    row: {
      cdr_id: uuid5Dns(r.raw_id as string),
      raw_id: r.raw_id as string,
      device_id: r.device_id as string,
      msisdn,
      service_type: r.svc as string,
      radio_access_type: rat,
      cell_id: `${r.lac}_${r.ci}`,
      session_start_time: String(start),
      session_end_time: String(end),
      duration_seconds: String(end - start),
      up_bytes: String(up),
      down_bytes: String(down),
      total_bytes: String(up + down),
      source_ip: String(ipNumber),
    },
  };
}

const NAMESPACE_DNS = Buffer.from("6ba7b8109dad11d180b400c04fd430c8", "hex");

/** RFC 4122 §4.3 name-based UUID, SHA-1, in the DNS namespace (Python's uuid.uuid5). */
export function uuid5Dns(name: string): string {
  const h = createHash("sha1").update(NAMESPACE_DNS).update(Buffer.from(name, "utf8")).digest();
  h[6] = (h[6]! & 0x0f) | 0x50;
  h[8] = (h[8]! & 0x3f) | 0x80;
  const x = h.subarray(0, 16).toString("hex");
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`;
}
