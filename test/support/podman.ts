/** podman facts the image and compose tests depend on. */
import { run } from "./services.ts";

/**
 * Whether a network podman makes resolves its containers' names: with CNI (podman 4.3) only when the
 * dnsname plugin is installed. Without it every service fails on its first name (getaddrinfo
 * ENOTFOUND clickhouse), long after `up` returned: checked first, so the cause is named at once.
 */
export async function composeNetworkHasDns(net: string): Promise<boolean> {
  await run(["podman", "network", "rm", "-f", net]).catch(() => {});
  await run(["podman", "network", "create", net]);
  try {
    return (await run(["podman", "network", "inspect", net, "--format", "{{.DNSEnabled}}"])).trim() === "true";
  } finally {
    await run(["podman", "network", "rm", "-f", net]).catch(() => {});
  }
}
