// The insert body a request sends is not rewritten by the next insert's: the store's two bodies
// are used in turn, so a request still being torn down never reads the rows of the next.
import { expect, setDefaultTimeout, test } from "bun:test";
import type { ClickHouseClient } from "@clickhouse/client";
import { ClickHouseDlqStore } from "../../src/dlq-table/store.ts";
import { dlqRow, type DlqRow } from "../../src/dlq-table/row.ts";
import { HOSTILE_DLQ } from "../fixtures/hostile-dlq.ts";

setDefaultTimeout(60_000);

class Bodies extends ClickHouseDlqStore {
  body(rows: readonly DlqRow[]): Uint8Array {
    return this.encode(rows);
  }
}

test("an insert's body stays as written through the next insert's encoding, and its memory serves the one after", () => {
  const store = new Bodies({} as ClickHouseClient, "cdr", "cdr_records");
  const rows = HOSTILE_DLQ.map((h) => dlqRow(h.message, { storedAt: 1_700_000_000 }));
  const first = store.body(rows.slice(0, 3));
  const written = first.slice();
  const second = store.body(rows.slice(3));
  expect(second.buffer).not.toBe(first.buffer);
  expect(Buffer.compare(first, written)).toBe(0);
  const third = store.body(rows.slice(1));
  expect(third.buffer).toBe(first.buffer);
});
