/**
 * The predicate of `dlq replay --where`, parsed and checked before any SQL is sent: the DLQ table's
 * columns, compared with literals (=, !=, <>, <, <=, >, >=, [NOT] IN (…), IS [NOT] NULL), joined by
 * AND, OR, NOT and parentheses. The SQL sent is written from the parsed tree, never from the text,
 * so the text cannot carry other SQL: a function, a subquery, a comment, a second statement or an
 * unknown name is refused with where it stands.
 */
import { DLQ_COLUMNS } from "../clickhouse/migrate.ts";
import { CdrWorkerError } from "../errors.ts";

export type Literal = { kind: "string"; value: string } | { kind: "number"; text: string } | { kind: "null" };
export type Predicate =
  | { kind: "and" | "or"; left: Predicate; right: Predicate }
  | { kind: "not"; operand: Predicate }
  | { kind: "compare"; column: string; op: string; value: Literal }
  | { kind: "in"; column: string; negated: boolean; values: Literal[] }
  | { kind: "null"; column: string; negated: boolean };

/** Longest predicate and deepest nesting taken: a selection, not a program. */
export const MAX_PREDICATE_CHARS = 4096;
const MAX_DEPTH = 32;

const COLUMNS: ReadonlySet<string> = new Set(DLQ_COLUMNS.map((c) => c.name));
const OPERATORS = ["<=", ">=", "!=", "<>", "=", "<", ">"] as const;

type Token = { kind: "word" | "string" | "number" | "punct"; text: string; at: number };

export class PredicateError extends CdrWorkerError {
  constructor(reason: string, at: number) {
    super("CONFIG_INVALID", `--where: ${reason} at character ${at + 1}`);
  }
}

function tokenize(text: string): Token[] {
  if (text.length > MAX_PREDICATE_CHARS)
    throw new PredicateError(`longer than ${MAX_PREDICATE_CHARS} characters`, MAX_PREDICATE_CHARS);
  const tokens: Token[] = [];
  let i = 0;
  while (i < text.length) {
    const c = text[i]!;
    if (/\s/.test(c)) {
      i++;
      continue;
    }
    const at = i;
    if (c === "'") {
      let value = "";
      for (i++; ; i++) {
        if (i >= text.length) throw new PredicateError("a string is not closed", at);
        const d = text[i]!;
        if (d === "\\") {
          if (i + 1 >= text.length) throw new PredicateError("a string is not closed", at);
          value += text[++i];
        } else if (d === "'") {
          if (text[i + 1] === "'") {
            value += "'";
            i++;
          } else break;
        } else value += d;
      }
      i++;
      tokens.push({ kind: "string", text: value, at });
      continue;
    }
    const num = /^-?\d+(\.\d+)?/.exec(text.slice(i, i + 64));
    if (num && (c !== "-" || /\d/.test(text[i + 1] ?? ""))) {
      i += num[0].length;
      tokens.push({ kind: "number", text: num[0], at });
      continue;
    }
    const word = /^[A-Za-z_][A-Za-z0-9_]*/.exec(text.slice(i, i + 128));
    if (word) {
      i += word[0].length;
      tokens.push({ kind: "word", text: word[0], at });
      continue;
    }
    const op = OPERATORS.find((o) => text.startsWith(o, i));
    if (op || c === "(" || c === ")" || c === ",") {
      i += op ? op.length : 1;
      tokens.push({ kind: "punct", text: op ?? c, at });
      continue;
    }
    throw new PredicateError(`unexpected ${JSON.stringify(c)}`, at);
  }
  return tokens;
}

/** Parses the predicate; throws a PredicateError naming what is wrong and where. */
export function parsePredicate(text: string): Predicate {
  const tokens = tokenize(text);
  let k = 0;
  const peek = () => tokens[k];
  const end = text.length;
  const keyword = (w: string) => peek()?.kind === "word" && peek()!.text.toUpperCase() === w;
  const expect = (what: string, ok: (t: Token) => boolean): Token => {
    const t = tokens[k];
    if (!t || !ok(t))
      throw new PredicateError(`expected ${what}${t ? `, found ${JSON.stringify(t.text)}` : ""}`, t?.at ?? end);
    k++;
    return t;
  };
  const punct = (p: string) => expect(JSON.stringify(p), (t) => t.kind === "punct" && t.text === p);

  const literal = (): Literal => {
    const isLiteral = (t: Token) =>
      t.kind === "string" || t.kind === "number" || (t.kind === "word" && t.text.toUpperCase() === "NULL");
    const t = expect("a literal ('text', a number or NULL)", isLiteral);
    if (t.kind === "string") return { kind: "string", value: t.text };
    if (t.kind === "number") return { kind: "number", text: t.text };
    return { kind: "null" };
  };
  const column = (): string => {
    const t = expect("a column of the DLQ table", (t) => t.kind === "word");
    if (!COLUMNS.has(t.text))
      throw new PredicateError(`${JSON.stringify(t.text)} is not a column of the DLQ table`, t.at);
    return t.text;
  };
  const comparison = (): Predicate => {
    const c = column();
    if (keyword("IS")) {
      k++;
      const negated = keyword("NOT") ? (k++, true) : false;
      expect("NULL", (t) => t.kind === "word" && t.text.toUpperCase() === "NULL");
      return { kind: "null", column: c, negated };
    }
    const negated = keyword("NOT") ? (k++, true) : false;
    if (negated || keyword("IN")) {
      expect("IN", (t) => t.kind === "word" && t.text.toUpperCase() === "IN");
      punct("(");
      const values = [literal()];
      while (peek()?.text === ",") {
        k++;
        values.push(literal());
      }
      punct(")");
      return { kind: "in", column: c, negated, values };
    }
    const isOperator = (t: Token) => t.kind === "punct" && (OPERATORS as readonly string[]).includes(t.text);
    const op = expect("a comparison (=, !=, <>, <, <=, >, >=, IN, IS)", isOperator);
    return { kind: "compare", column: c, op: op.text, value: literal() };
  };
  const unary = (depth: number): Predicate => {
    if (depth > MAX_DEPTH) throw new PredicateError(`nested deeper than ${MAX_DEPTH}`, peek()?.at ?? end);
    if (keyword("NOT")) {
      k++;
      return { kind: "not", operand: unary(depth + 1) };
    }
    if (peek()?.text === "(" && peek()?.kind === "punct") {
      k++;
      const inner = or(depth + 1);
      punct(")");
      return inner;
    }
    return comparison();
  };
  const and = (depth: number): Predicate => {
    let left = unary(depth);
    while (keyword("AND")) {
      k++;
      left = { kind: "and", left, right: unary(depth) };
    }
    return left;
  };
  const or = (depth: number): Predicate => {
    let left = and(depth);
    while (keyword("OR")) {
      k++;
      left = { kind: "or", left, right: and(depth) };
    }
    return left;
  };
  if (tokens.length === 0) throw new PredicateError("empty", 0);
  const tree = or(0);
  if (k < tokens.length) throw new PredicateError(`unexpected ${JSON.stringify(tokens[k]!.text)}`, tokens[k]!.at);
  return tree;
}

/** The SQL of a parsed predicate: written from the tree, every literal quoted anew. */
export function predicateSql(p: Predicate): string {
  switch (p.kind) {
    case "and":
    case "or":
      return `(${predicateSql(p.left)} ${p.kind.toUpperCase()} ${predicateSql(p.right)})`;
    case "not":
      return `(NOT ${predicateSql(p.operand)})`;
    case "compare":
      return `(${p.column} ${p.op} ${literalSql(p.value)})`;
    case "in":
      return `(${p.column} ${p.negated ? "NOT IN" : "IN"} (${p.values.map(literalSql).join(", ")}))`;
    case "null":
      return `(${p.column} IS ${p.negated ? "NOT NULL" : "NULL"})`;
  }
}

/**
 * A number as every supported server reads it in decimal: 18.16 reads a leading zero as octal
 * (`010` is 8), so leading zeros go (`010` → `10`, `-007.50` → `-7.50`, `000` → `0`).
 */
function decimal(text: string): string {
  const m = /^(-?)0*(\d+(?:\.\d+)?)$/.exec(text);
  if (!m) return text;
  const digits = m[2]!.startsWith(".") ? `0${m[2]}` : m[2]!;
  return `${m[1]}${digits}`;
}

function literalSql(l: Literal): string {
  if (l.kind === "null") return "NULL";
  if (l.kind === "number") return decimal(l.text);
  const escaped = l.value
    .replaceAll("\\", "\\\\")
    .replaceAll("'", "\\'")
    .replace(/[\x00-\x1f\x7f]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, "0")}`);
  return `'${escaped}'`;
}
