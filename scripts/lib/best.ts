/** The best of 5 rounds of `n` calls of `fn`: µs a call, two decimals (the one-core benches). */
export function bestOf5(n: number, fn: (i: number) => unknown): number {
  let min = Infinity;
  for (let round = 0; round < 5; round++) {
    const t0 = performance.now();
    for (let i = 0; i < n; i++) fn(i);
    min = Math.min(min, ((performance.now() - t0) * 1000) / n);
  }
  return +min.toFixed(2);
}
