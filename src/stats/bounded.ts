/**
 * Limits on the stats server's requests. Its routes share the worker's event loop and answer from
 * memory in microseconds, so a caller that opens many requests, or a handler that stalls, must cost
 * the worker nothing: at most `maxInFlight` requests are served at once (the rest get 503 at once),
 * and a request not answered within `timeoutMs` gets 503. The server itself closes connections idle
 * past its idleTimeout and refuses bodies past its size limit.
 */
export interface Bounds {
  maxInFlight: number;
  timeoutMs: number;
}

export function bounded<S>(fetch: (req: Request, server?: S) => Response | Promise<Response>, b: Bounds) {
  let inFlight = 0;
  const busy = () =>
    new Response("busy: too many requests at once\n", { status: 503, headers: { "retry-after": "1" } });
  return async function boundedFetch(req: Request, server?: S): Promise<Response> {
    if (inFlight >= b.maxInFlight) return busy();
    inFlight++;
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      const late = new Promise<Response>((resolve) => {
        timer = setTimeout(() => resolve(new Response("timed out\n", { status: 503 })), b.timeoutMs);
      });
      return await Promise.race([Promise.resolve(fetch(req, server)), late]);
    } finally {
      clearTimeout(timer);
      inFlight--;
    }
  };
}
