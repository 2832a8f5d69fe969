// Where `audit --resume`'s next run starts reading the DLQ: the first envelope of a record past the
// range this run audited, or the end of this run's read where there is none.
import { expect, setDefaultTimeout, test } from "bun:test";
import { NextDlqStarts } from "../../src/audit/position.ts";

setDefaultTimeout(60_000);

test("the next DLQ start is the first envelope of a record past the audited range, else the end read", () => {
  const next = new NextDlqStarts([
    { partition: 0, from: 0, to: 100 },
    { partition: 1, from: 50, to: 60 },
  ]);
  next.seen({ partition: 0, offset: 99 }, { partition: 0, offset: 10 }); // audited now
  next.seen({ partition: 1, offset: 61 }, { partition: 0, offset: 12 }); // the next run's
  next.seen({ partition: 0, offset: 100 }, { partition: 0, offset: 15 }); // later in the DLQ: the first stays
  next.seen({ partition: 0, offset: 150 }, { partition: 1, offset: 40 });
  next.seen({ partition: 7, offset: 1 }, { partition: 1, offset: 2 }); // a partition not audited: not counted
  expect([...next.starts(new Map([[0, 30], [1, 45], [2, 9]]))]).toEqual([[0, 12], [1, 40], [2, 9]]);
});
