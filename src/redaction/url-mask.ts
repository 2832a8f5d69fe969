/**
 * A text as it may be shown: every URL in it without its user information (`http://u:pw@h` →
 * `http://[redacted]@h`), so a password written into CLICKHOUSE_URL never reaches a message or a
 * log line. The user information of a URL runs to the last `@` before the next URL or the text's
 * end, whatever characters the password holds (`@`, `,`, `/`, `:`, spaces; all but a separator
 * followed by another URL's scheme): a message that names a URL and then an `@` of its own loses
 * the text between to the mask, never a password to the reader.
 */
/** A URL starts at the text's start or after a separator: `a://` inside a password starts none. */
const URL_START = /(?<=^|[\s,;"'(=[<])[a-z][a-z0-9+.-]*:\/\//gi;

export function withoutUserInfo<T extends string | undefined>(value: T): T {
  if (value === undefined || !value.includes("://")) return value;
  const starts = [...value.matchAll(URL_START)].map((m) => ({ at: m.index!, after: m.index! + m[0].length }));
  let out = "";
  let from = 0;
  starts.forEach((s, i) => {
    const end = i + 1 < starts.length ? starts[i + 1]!.at : value.length;
    const at = value.lastIndexOf("@", end - 1);
    out += value.slice(from, s.after);
    out += at >= s.after ? `[redacted]${value.slice(at, end)}` : value.slice(s.after, end);
    from = end;
  });
  return (out + value.slice(from)) as T;
}
