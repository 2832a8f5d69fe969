// The import graph of src/, read from its import and export-from statements: between files, and
// between rooms (a folder right under src/, or a file at its root). Circles are found with
// Tarjan's strongly connected components, each named by the imports that tie it.
import { readFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";

/** An import: the file that imports, and the file it names, both relative to the root. */
export interface Import {
  from: string;
  to: string;
}

const SPECIFIER = /^(?:import|export)\s[^;]*?\sfrom\s+"(\.{1,2}\/[^"]+)"|^import\s+"(\.{1,2}\/[^"]+)"/gms;

/** The relative imports of each source file (`files` relative to `root`), type-only ones included. */
export function importsOf(root: string, files: readonly string[]): Import[] {
  return files.flatMap((from) =>
    [...readFileSync(join(root, from), "utf8").matchAll(SPECIFIER)].map((m) => ({
      from,
      to: relative(root, join(root, dirname(from), (m[1] ?? m[2])!)),
    })),
  );
}

/** The room a file of src/ lives in: its folder right under src/, or the file itself at the root. */
export function roomOf(file: string): string {
  const [, first, second] = file.split("/");
  return second === undefined ? first! : `${first}/`;
}

/**
 * The circles among nodes: each strongly connected component of more than one node, with the
 * edges inside it (the imports that tie it), as "a -> b (the imports behind it)".
 */
export function circles(edges: ReadonlyArray<{ from: string; to: string; why?: string }>): string[][] {
  const out = new Map<string, Array<{ to: string; why?: string }>>();
  for (const e of edges) if (e.from !== e.to) out.set(e.from, [...(out.get(e.from) ?? []), e]);
  const index = new Map<string, number>(), low = new Map<string, number>(), stack: string[] = [], on = new Set<string>();
  const found: string[][] = [];
  let next = 0;
  const visit = (v: string) => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    on.add(v);
    for (const { to } of out.get(v) ?? []) {
      if (!index.has(to)) {
        visit(to);
        low.set(v, Math.min(low.get(v)!, low.get(to)!));
      } else if (on.has(to)) low.set(v, Math.min(low.get(v)!, index.get(to)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      on.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1) {
      const inside = new Set(component);
      found.push(
        component.flatMap((a) => (out.get(a) ?? []).filter((e) => inside.has(e.to)).map((e) => `${a} -> ${e.to}${e.why ? ` (${e.why})` : ""}`)),
      );
    }
  };
  for (const v of [...new Set(edges.flatMap((e) => [e.from, e.to]))].sort()) if (!index.has(v)) visit(v);
  return found.map((c) => [...new Set(c)].sort());
}

/** The imports between rooms, each with the file imports behind it. */
export function roomImports(imports: readonly Import[]): Array<{ from: string; to: string; why: string }> {
  const byPair = new Map<string, string[]>();
  for (const i of imports) {
    const [a, b] = [roomOf(i.from), roomOf(i.to)];
    if (a !== b) byPair.set(`${a}\n${b}`, [...(byPair.get(`${a}\n${b}`) ?? []), `${i.from} -> ${i.to}`]);
  }
  return [...byPair].map(([k, why]) => {
    const [from, to] = k.split("\n") as [string, string];
    return { from, to, why: why.join("; ") };
  });
}
