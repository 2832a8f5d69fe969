// The disruption controller's arithmetic (policy/v1 PodDisruptionBudget, as Kubernetes' eviction API
// applies it) over the shipped PDB and the pods' readiness as the Deployment's readiness probe path
// answers for each worker's situation, answered by the worker's own stats app: a drain or a rollout
// must be able to take a pod beside a standby worker, and during a ClickHouse outage under `wait`.
import { expect, setDefaultTimeout, test } from "bun:test";
import { createStatsApp } from "../../src/stats/app.ts";
import { readiness } from "../../src/stats/readiness.ts";
import { one, rendered } from "../support/kustomize.ts";
import { statsSource } from "../support/stats-source.ts";

setDefaultTimeout(60_000);

const docs = rendered();
const PDB = one(docs, "PodDisruptionBudget").spec as {
  maxUnavailable?: number; minAvailable?: number; unhealthyPodEvictionPolicy?: "IfHealthyBudget" | "AlwaysAllow";
};
const PROBE_PATH = one(docs, "Deployment").spec.template.spec.containers[0].readinessProbe.httpGet.path as string;

/** Whether the eviction API lets pod `target` go (pkg/registry/core/pod/storage/eviction.go, policy/v1). */
function evictionAllowed(replicas: number, ready: boolean[], target: number): boolean {
  for (const v of [PDB.maxUnavailable, PDB.minAvailable]) if (v !== undefined && typeof v !== "number") throw new Error("percentages are not modelled");
  const desiredHealthy = PDB.minAvailable ?? replicas - PDB.maxUnavailable!;
  const currentHealthy = ready.filter(Boolean).length;
  if (!ready[target]) {
    // A running pod that is not ready: IfHealthyBudget (the default) only while the budget holds.
    return (PDB.unhealthyPodEvictionPolicy ?? "IfHealthyBudget") === "AlwaysAllow" || currentHealthy >= desiredHealthy;
  }
  return currentHealthy - desiredHealthy > 0;
}

type Situation = { state?: string; assigned?: boolean; clickhouseUp?: boolean };

/** What the readiness probe gets from a worker in this situation. */
async function probeReady(w: Situation): Promise<boolean> {
  const state = w.state ?? "running";
  const up = w.clickhouseUp ?? true;
  const ready = () =>
    readiness({ assigned: w.assigned ?? true, clickhouse: { reachable: up, inserting: up }, state, waiting: 0, lastProgressAt: 0, now: 0 });
  const res = await createStatsApp({ ...statsSource(), state: () => state, ready }).request(PROBE_PATH);
  return res.status === 200;
}

async function evictable(workers: Situation[]): Promise<boolean[]> {
  const ready = await Promise.all(workers.map(probeReady));
  return workers.map((_, i) => evictionAllowed(workers.length, ready, i));
}

test("beside a standby worker (more pods than partitions), a drain can take a worker that owns partitions", async () => {
  expect(await evictable([{}, {}, {}, { assigned: false }])).toEqual([true, true, true, true]);
});

test("during a ClickHouse outage under wait, with every worker paused, a drain can take any of them", async () => {
  const outage = { clickhouseUp: false };
  expect(await evictable([outage, outage, outage])).toEqual([true, true, true]);
});

test("the budget still holds: while one worker starts, no running one is taken; the starting one may go", async () => {
  expect(await evictable([{ state: "starting" }, {}, {}])).toEqual([true, false, false]);
  expect(await evictable([{ state: "draining" }, {}, {}])).toEqual([true, false, false]);
});
