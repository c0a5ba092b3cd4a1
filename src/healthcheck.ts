#!/usr/bin/env node
/**
 * The container's health check (Dockerfile HEALTHCHECK): exit 0 when this instance is ready to
 * serve (up, Redis reachable, not draining), 1 otherwise, with the reason on stderr. It asks the
 * admin port's /readyz, or with ADMIN_PORT=0 the standard gRPC health service.
 */
import { credentials, loadPackageDefinition, type Client, type ServiceError } from "@grpc/grpc-js";
import { loadSync } from "@grpc/proto-loader";
import { protoPath } from "grpc-health-check";
import { loadConfig } from "./config.js";

const TIMEOUT_MS = 2_000;

/** Where a local client reaches a listener bound to `host`. */
function localAddress(host: string): string {
  if (host === "0.0.0.0" || host === "") return "127.0.0.1";
  if (host === "::") return "[::1]";
  return host.includes(":") ? `[${host}]` : host;
}

async function adminReady(host: string, port: number): Promise<string | undefined> {
  const res = await fetch(`http://${localAddress(host)}:${port}/readyz`, {
    signal: AbortSignal.timeout(TIMEOUT_MS),
  });
  return res.status === 200 ? undefined : `/readyz answered ${res.status}`;
}

interface HealthClient extends Client {
  check(
    req: { service: string },
    options: { deadline: number },
    cb: (err: ServiceError | null, res?: { status: string }) => void,
  ): void;
}

function grpcServing(host: string, port: number): Promise<string | undefined> {
  const pkg = loadPackageDefinition(loadSync(protoPath, { enums: String })) as unknown as {
    grpc: { health: { v1: { Health: new (address: string, creds: unknown) => HealthClient } } };
  };
  const client = new pkg.grpc.health.v1.Health(`${localAddress(host)}:${port}`, credentials.createInsecure());
  return new Promise((resolve) => {
    client.check({ service: "" }, { deadline: Date.now() + TIMEOUT_MS }, (err, res) => {
      client.close();
      if (err !== null) resolve(`gRPC health check failed: ${err.message}`);
      else resolve(res?.status === "SERVING" ? undefined : `gRPC health is ${res?.status ?? "unknown"}`);
    });
  });
}

async function main(): Promise<void> {
  const config = loadConfig();
  const problem =
    config.ADMIN_PORT !== 0
      ? await adminReady(config.HOST, config.ADMIN_PORT)
      : await grpcServing(config.HOST, config.GRPC_PORT);
  if (problem !== undefined) {
    process.stderr.write(`not ready: ${problem}\n`);
    process.exit(1);
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`not ready: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
