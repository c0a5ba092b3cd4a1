/**
 * A REST call's deadline, from its `grpc-timeout` header as Envoy forwards it or a client sends it
 * (docs/gateway.md#status-details-and-deadlines).
 */
import type { IncomingMessage } from "node:http";
import { firstHeader } from "./request.js";

/** Milliseconds per unit of a `grpc-timeout` value (gRPC over HTTP/2: H, M, S, m, u, n). */
const TIMEOUT_UNIT_MS: Record<string, number> = { H: 3_600_000, M: 60_000, S: 1_000, m: 1, u: 1e-3, n: 1e-6 };

/**
 * The deadline a `grpc-timeout` header sets (as Envoy forwards one, or a client sends it), in
 * epoch ms from `nowMs`; undefined without one or for a malformed one, which sets none.
 */
export function deadlineOf(header: string | undefined, nowMs: number): number | undefined {
  const m = header === undefined ? null : /^(\d{1,8})([HMSmun])$/.exec(header);
  if (m === null) return undefined;
  // Whole milliseconds, as grpc-js counts them: under 1 ms (`1n`, `999u`) is no time at all.
  return nowMs + Math.floor(Number(m[1]) * (TIMEOUT_UNIT_MS[m[2] ?? "S"] ?? 1_000));
}

/** The deadline of `req`, counted from now, in epoch ms; undefined when it sets none. */
export function requestDeadline(req: IncomingMessage): number | undefined {
  return deadlineOf(firstHeader(req, "grpc-timeout"), Date.now());
}
