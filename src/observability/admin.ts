import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { errorMessage, type Logger } from "../log.js";

/** What the admin listener serves; each read happens per request. */
export interface AdminSources {
  /** The Prometheus exposition. */
  metrics: () => Promise<{ contentType: string; body: string }>;
  /** Whether the service can do its work now (Redis answers, not shutting down), for `/readyz`. */
  ready: () => Promise<boolean>;
}

export interface AdminServer {
  port: number;
  close(): Promise<void>;
}

/**
 * The operators' listener (ADMIN_PORT, docs/settings.md#service-and-network): `GET /metrics`, `/healthz` (the
 * process answers) and `/readyz` (it can serve). Never routed by Envoy, so it exists the same
 * with the built-in gateway or Envoy in front; HEAD is answered like GET without a body.
 */
export async function startAdmin(
  listen: { host: string; port: number },
  sources: AdminSources,
  log: Logger,
): Promise<AdminServer> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    const send = (status: number, type: string, body: string) => {
      res.writeHead(status, { "content-type": type, "cache-control": "no-store" });
      res.end(req.method === "HEAD" ? undefined : body);
    };
    if (req.method !== "GET" && req.method !== "HEAD") {
      res.setHeader("allow", "GET, HEAD");
      send(405, "text/plain; charset=utf-8", "method not allowed\n");
      return;
    }
    const json = "application/json";
    switch (path) {
      case "/healthz":
        send(200, json, '{"status":"ok"}\n');
        return;
      case "/readyz":
        void sources.ready().then(
          (up) => {
            send(up ? 200 : 503, json, up ? '{"status":"ready"}\n' : '{"status":"not_ready"}\n');
          },
          () => {
            send(503, json, '{"status":"not_ready"}\n');
          },
        );
        return;
      case "/metrics":
        sources.metrics().then(
          ({ contentType, body }) => {
            send(200, contentType, body);
          },
          (err: unknown) => {
            log.warn("metrics not collected", { error: errorMessage(err) });
            send(500, "text/plain; charset=utf-8", "metrics not collected\n");
          },
        );
        return;
      default:
        send(404, "text/plain; charset=utf-8", "not found: /metrics, /healthz and /readyz are served here\n");
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(listen.port, listen.host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => {
          resolve();
        });
        server.closeAllConnections();
      }),
  };
}
