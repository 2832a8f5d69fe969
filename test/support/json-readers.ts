/**
 * What common JSON readers at their defaults say of texts: Python's json module and Jackson's
 * ObjectMapper (the jars the provisioned Kafka ships, run with Java's source launcher). One process
 * each for all the texts; "" for a text that parses, else the reader's error.
 */
import { ROOT } from "./services.ts";

const DIR = `${ROOT}/test/support/json-readers`;

async function judge(cmd: string[], texts: readonly string[]): Promise<string[]> {
  const proc = Bun.spawn(cmd, { stdin: new TextEncoder().encode(JSON.stringify(texts)), stdout: "pipe", stderr: "pipe" });
  const [out, err] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
  if ((await proc.exited) !== 0) throw new Error(`${cmd.join(" ")} exited ${proc.exitCode}: ${err.slice(0, 2_000)}`);
  return JSON.parse(out) as string[];
}

export function pythonJson(texts: readonly string[]): Promise<string[]> {
  return judge(["python3", `${DIR}/read_json.py`], texts);
}

export function jackson(texts: readonly string[]): Promise<string[]> {
  return judge(["java", "-cp", `${ROOT}/.local/kafka/libs/*`, `${DIR}/ReadJson.java`], texts);
}

/** The texts either reader refuses, each with its reader's error. */
export async function unreadable(texts: readonly string[]): Promise<string[]> {
  const [py, jv] = await Promise.all([pythonJson(texts), jackson(texts)]);
  const out: string[] = [];
  texts.forEach((t, i) => {
    if (py[i]) out.push(`python json on #${i} (${t.slice(0, 60)}…): ${py[i]}`);
    if (jv[i]) out.push(`jackson on #${i} (${t.slice(0, 60)}…): ${jv[i]}`);
  });
  return out;
}
