/** `cdr-worker generate`: synthetic vendor CDRs into the raw topic, at a rate, with defects. */
import type { Config } from "../config.ts";
import { DEFECTS, SyntheticCdrs, type Defect } from "../generate/synthetic.ts";
import { Producer } from "../kafka/producer.ts";
import { CdrWorkerError } from "../errors.ts";
import type { ExitKind } from "../exits.ts";
import { numberFlag, stringFlag, type ParsedArgs } from "./args.ts";
import { clientProps } from "./kafka-clients.ts";

export const GENERATE_HELP = `cdr-worker generate [--count N] [--rate R] [--invalid-share S] [--defects a,b]
                    [--callers N] [--seed N] [--id-prefix P]
  Sends N (default 10000) synthetic CDRs to KAFKA_TOPIC_RAW at up to R records/s (0 = unthrottled,
  the default). A share S (default 0.03) carries one defect each, spread over --defects
  (default all: ${DEFECTS.join(", ")}). Prints a JSON summary: sent, valid, invalid by defect.`;

export async function generateCommand(cfg: Config, args: ParsedArgs): Promise<ExitKind> {
  const count = numberFlag(args, "count", 10_000, 1, 1e9);
  const rate = numberFlag(args, "rate", 0, 0, 1e7);
  const invalidShare = numberFlag(args, "invalid-share", 0.03, 0, 1);
  const callers = numberFlag(args, "callers", 100_000, 0, 1e9);
  const seed = numberFlag(args, "seed", Date.now() % 2 ** 31, 0, 2 ** 31);
  const defectList = stringFlag(args, "defects")?.split(",").filter(Boolean) ?? [...DEFECTS];
  for (const d of defectList)
    if (!DEFECTS.includes(d as Defect))
      throw new CdrWorkerError(
        "CONFIG_INVALID",
        `--defects: unknown defect ${d}; expected some of ${DEFECTS.join(", ")}`,
      );
  const gen = new SyntheticCdrs({
    seed,
    callers,
    invalidShare,
    defects: defectList as Defect[],
    idPrefix: stringFlag(args, "id-prefix") ?? `gen${seed}`,
  });
  const producer = new Producer(clientProps(cfg, "generator"));
  const summary = { topic: cfg.kafka.topicRaw, sent: 0, valid: 0, invalid: {} as Record<string, number>, seconds: 0 };
  const started = performance.now();
  const chunk = rate > 0 ? Math.max(1, Math.min(10_000, Math.floor(rate / 20))) : 10_000;
  try {
    while (summary.sent < count) {
      const n = Math.min(chunk, count - summary.sent);
      const values: string[] = new Array(n);
      for (let i = 0; i < n; i++) {
        const r = gen.next();
        values[i] = r.text;
        if (r.defect) summary.invalid[r.defect] = (summary.invalid[r.defect] ?? 0) + 1;
        else summary.valid++;
      }
      await producer.produceBatch(cfg.kafka.topicRaw, values);
      summary.sent += n;
      if (rate > 0) {
        const ahead = (summary.sent / rate) * 1000 - (performance.now() - started);
        if (ahead > 0) await Bun.sleep(ahead);
      }
    }
    await producer.flush();
  } finally {
    producer.close();
  }
  summary.seconds = Math.round((performance.now() - started) / 10) / 100;
  console.log(JSON.stringify(summary));
  return "OK";
}
