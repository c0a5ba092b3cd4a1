import { randomUUID } from "node:crypto";
import { RingfenceError, type ErrorCode } from "../errors.js";
import type { Logger } from "../log.js";
import type { Caller } from "../rpc/callers.js";

/** The transport a call came in on: gRPC, or REST through the built-in gateway. */
export type Transport = "grpc" | "http";

/** What is known of one call once it is answered, for metrics and the request log. */
export interface CallRecord {
  transport: Transport;
  /** Fully qualified service, e.g. `ringfence.lookup.v1.LookupService`; `-` for a path no route matched. */
  service: string;
  /** The RPC, e.g. `LookupPhoneNumber`; `-` for a path no route matched. */
  method: string;
  /** `ok`, or the error's stable code. */
  code: "ok" | ErrorCode;
  grpcStatus: number;
  httpStatus: number;
  durationMs: number;
  requestId: string;
  /** Who called, when the method authenticates: `customer:<uuid>` or `app:<id>`. */
  caller?: string | undefined;
  /**
   * The abuse rule that refused the call, named by its setting (`RATE_LIMIT_NUMBER`,
   * `SPAM_RANGE_BURST`, ...): with an error (429, 403), its `refusedBy`, or inside a success (a V1
   * send answered `rate_limited`), said with `CallContext.noteRefusal`.
   */
  refusedBy?: string | undefined;
  /**
   * The caller's deadline had passed before the call started (a `grpc-timeout` of `0S`, a gRPC
   * deadline gone by when its request was in): refused before any work, and the caller's doing.
   */
  deadlineExpiredOnArrival?: boolean | undefined;
}

/**
 * Whose doing an answer is: `ok`; `client_error`, an answer the caller brought about (a 4xx, or a
 * deadline that had passed before the call started); `server_error`, any other 5xx (a failure of
 * ours, Redis out of reach, a deadline that passed while the call ran). The metrics' `outcome`.
 */
export type CallOutcome = "ok" | "client_error" | "server_error";

export function outcomeOf(
  r: Pick<CallRecord, "code" | "httpStatus" | "deadlineExpiredOnArrival">,
): CallOutcome {
  if (r.code === "ok") return "ok";
  return r.deadlineExpiredOnArrival === true || r.httpStatus < 500 ? "client_error" : "server_error";
}

/**
 * What code deep inside a call needs of it, handed down by the code that calls it (a handler
 * passes its CallContext): the log whose lines name the call, the caller's deadline, and where
 * a refusal inside a success is said. It is passed rather than found in an AsyncLocalStorage,
 * whose async hooks cost every promise and socket write of the process on Node 20 and 22
 * (docs/benchmark.md#what-a-call-pays-for-on-node-20).
 */
export interface CallScope {
  /** The service's log; every line it writes names the call (request_id, method). */
  readonly log: Logger;
  /** When the caller stops waiting (epoch ms): its gRPC deadline or `grpc-timeout`; none if unset. */
  readonly deadlineMs?: number | undefined;
  /**
   * Names the abuse rule (its setting) that refused the call inside a success answer (a V1 send
   * answered `rate_limited`), for the refusals metric and the request log; the first one said
   * wins. A refusal thrown says it with the error's `refusedBy` instead.
   */
  noteRefusal(rule: string): void;
}

/**
 * What a call tells of itself beyond its answer, kept by the binding while it runs: its request
 * id and method for its log lines, and the abuse rule that refused it (an error's `refusedBy`, or
 * `CallContext.noteRefusal` for a refusal inside a success).
 */
export interface CallNotes {
  requestId: string;
  /** `<service>/<Method>`. */
  method: string;
  refusedBy?: string;
}

/** Told of every answered call, once, after its answer is decided. Must not throw. */
export type CallObserver = (record: CallRecord) => void;

/** The response header (and gRPC metadata key) that carries the request id. */
export const REQUEST_ID_HEADER = "x-request-id";

/** Printable ASCII without spaces, as Envoy and most proxies generate; anything else is replaced. */
const REQUEST_ID = /^[\x21-\x7e]{1,128}$/;

/** The caller's `x-request-id` when it is a sane one, else a new UUID. */
export function requestIdOf(incoming: string | undefined): string {
  return incoming !== undefined && REQUEST_ID.test(incoming) ? incoming : randomUUID();
}

/** A caller's identity for logs, as the domain that made its key names it. */
export function callerIdentity(caller: Caller | undefined): string | undefined {
  if (caller === undefined) return undefined;
  return caller.key.identity(caller.who);
}

/** Milliseconds since `start` (a `process.hrtime.bigint()` reading). */
export function elapsedMs(start: bigint): number {
  return Number(process.hrtime.bigint() - start) / 1e6;
}

/** One observer that tells each of `observers` in turn; one that throws does not stop the others. */
export function allOf(observers: readonly CallObserver[]): CallObserver {
  return (record) => {
    for (const observe of observers) {
      try {
        observe(record);
      } catch {
        // An observer's failure must never change a call's answer.
      }
    }
  };
}

/**
 * Throws 504 deadline_exceeded when the call's caller has stopped waiting, so that what comes next
 * (a message sent, a charge) is not done for nobody. Outside a call (no scope) it does nothing.
 */
export function checkDeadline(call: Pick<CallScope, "deadlineMs"> | undefined): void {
  const deadline = call?.deadlineMs;
  if (deadline !== undefined && Date.now() >= deadline) {
    throw new RingfenceError("deadline_exceeded", "the call's deadline passed before it was answered");
  }
}
