/**
 * Why a TLS handshake with a broker failed, in words an operator can act on. librdkafka reports
 * every verification failure alike ("certificate verify failed: broker certificate could not be
 * verified"), whether the certificate expired, names another host or comes from another CA; this
 * looks at the certificate the broker presents, with the CA the worker was given, and says which.
 */
import { readFileSync } from "node:fs";
import { checkServerIdentity, connect, type PeerCertificate } from "node:tls";

/** The cause for the first bootstrap broker that fails verification, or null when none does (or none answers). */
export async function diagnoseBrokerTls(
  bootstrap: string,
  caLocation: string | undefined,
  timeoutMs = 3000,
): Promise<string | null> {
  let ca: Buffer | undefined;
  try {
    ca = caLocation ? readFileSync(caLocation) : undefined;
  } catch {
    return `ssl.ca.location ${caLocation} cannot be read`;
  }
  for (const hostPort of bootstrap
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean)) {
    const i = hostPort.lastIndexOf(":");
    const host = hostPort.slice(0, i).replace(/^\[|\]$/g, "");
    const port = Number(hostPort.slice(i + 1));
    const cause = await inspect(host, port, ca, timeoutMs);
    if (cause) return `TLS to broker ${hostPort} failed: ${cause}`;
  }
  return null;
}

function inspect(host: string, port: number, ca: Buffer | undefined, timeoutMs: number): Promise<string | null> {
  return new Promise((resolve) => {
    // Verification is judged here, from the certificate, so the handshake itself must not stop at it.
    const socket = connect({
      host,
      port,
      ca,
      rejectUnauthorized: false,
      servername: /^[\d.]+$|:/.test(host) ? undefined : host,
    });
    const done = (v: string | null) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(v);
    };
    const timer = setTimeout(() => done(null), timeoutMs);
    socket.once("error", () => done(null));
    socket.once("secureConnect", () => {
      const cert = socket.getPeerCertificate();
      const code = socket.authorizationError
        ? String((socket.authorizationError as Error & { code?: string }).code ?? socket.authorizationError)
        : null;
      done(explain(host, cert, code));
    });
  });
}

function explain(host: string, cert: PeerCertificate, code: string | null): string | null {
  if (code === "CERT_HAS_EXPIRED") return `the broker's certificate has expired (not valid after ${cert.valid_to})`;
  if (code === "CERT_NOT_YET_VALID") return `the broker's certificate is not valid yet (not before ${cert.valid_from})`;
  if (code === "ERR_TLS_CERT_ALTNAME_INVALID" || (!code && checkServerIdentity(host, cert))) {
    return `host name mismatch: the broker's certificate names ${cert.subjectaltname ?? cert.subject?.CN}, not ${host}`;
  }
  if (code) {
    const issuer = cert.issuer?.CN ?? "unknown";
    return (
      "the broker's certificate is not signed by a CA the worker trusts (ssl.ca.location): " +
      `wrong CA (${code}, issuer ${issuer})`
    );
  }
  return null;
}
