// A group member that prints each accepted heartbeat its statistics show (kafka/heartbeat-proof.ts), for
// test/sim/fidelity.test.ts, which runs it in a cgroup it cuts off from the broker.
// Usage: bun heartbeat-member.ts <brokers> <topic> <group>. Prints a JSON line per proof, times in
// wall-clock ms so the test can compare them with its own: {"proof": sentAfter, "at": now}.
import { HEARTBEAT_INTERVAL_MS, STATISTICS_INTERVAL_MS } from "../../src/cli/kafka-clients.ts";
import { Consumer } from "../../src/kafka/consumer.ts";

const [brokers, topic, group] = process.argv.slice(2) as [string, string, string];
const consumer = new Consumer({
  props: {
    "bootstrap.servers": brokers,
    "group.id": group,
    // The worker's own, as the simulated member's (test/sim/kafka.ts).
    "statistics.interval.ms": String(STATISTICS_INTERVAL_MS),
    "session.timeout.ms": "6000",
    "heartbeat.interval.ms": String(HEARTBEAT_INTERVAL_MS),
  },
  topics: [topic],
});
const wall = (mono: number) => Math.round(Date.now() - (performance.now() - mono));
consumer.onStanding((s) => {
  if (s.kind === "accepted") console.log(JSON.stringify({ proof: wall(s.sentAfter), at: Date.now() }));
});
let stopping = false;
process.on("SIGTERM", () => (stopping = true));
while (!stopping) {
  consumer.poll(100);
  await consumer.waitForMessages(200);
}
await consumer.close();
