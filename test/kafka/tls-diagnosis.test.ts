// What the start-up diagnosis says about a broker's certificate, against TLS listeners that present
// the certificates provisioning made (scripts/tls/make-certs.sh): the one librdkafka only calls
// "certificate verify failed" is told apart as expired, another host's, or another CA's.
import { afterAll, expect, setDefaultTimeout, test } from "bun:test";
import { readFileSync } from "node:fs";
import { createServer, type Server } from "node:tls";
import { diagnoseBrokerTls } from "../../src/kafka/tls-diagnosis.ts";
import { ROOT } from "../support/services.ts";

setDefaultTimeout(60_000);

const TLS = `${ROOT}/.local/tls`;
const servers: Server[] = [];
afterAll(() => servers.forEach((s) => s.close()));

/** A TLS listener on a free port presenting `name`.crt; resolves with "127.0.0.1:port". */
async function broker(name: string): Promise<string> {
  const s = createServer({ key: readFileSync(`${TLS}/${name}.key`), cert: readFileSync(`${TLS}/${name}.crt`) }, (c) => c.end());
  servers.push(s);
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  return `127.0.0.1:${(s.address() as { port: number }).port}`;
}

test("a broker whose certificate verifies: no cause", async () => {
  expect(await diagnoseBrokerTls(await broker("server"), `${TLS}/ca.crt`)).toBeNull();
});

test("expired, another host's, another CA's: each said as such, naming the broker", async () => {
  const expired = await broker("expired");
  expect(await diagnoseBrokerTls(expired, `${TLS}/ca.crt`)).toStartWith(`TLS to broker ${expired} failed: the broker's certificate has expired`);
  expect(await diagnoseBrokerTls(await broker("mismatch"), `${TLS}/ca.crt`)).toContain("host name mismatch: the broker's certificate names DNS:wrong.example.invalid, not 127.0.0.1");
  expect(await diagnoseBrokerTls(await broker("server"), `${TLS}/other-ca.crt`)).toContain("not signed by a CA the worker trusts");
});

test("an unreadable CA file is the cause; a broker that does not answer is none", async () => {
  expect(await diagnoseBrokerTls("127.0.0.1:1", `${TLS}/missing.crt`)).toBe(`ssl.ca.location ${TLS}/missing.crt cannot be read`);
  expect(await diagnoseBrokerTls("127.0.0.1:1", `${TLS}/ca.crt`, 500)).toBeNull();
});
