import { status as GrpcStatus } from "@grpc/grpc-js";
import type { ZodError } from "zod";

/**
 * Every error a caller can see, keyed by its stable code. Each code maps once to a gRPC status
 * and an HTTP status; the body shape depends on the API family (see `ErrorDialect`).
 */
export const ERRORS = {
  // V1 phone API (specification "Errors", decisions section 4).
  invalid_phone_number: { grpc: GrpcStatus.INVALID_ARGUMENT, http: 400 },
  bad_request: { grpc: GrpcStatus.INVALID_ARGUMENT, http: 400 },
  unsupported_region: { grpc: GrpcStatus.INVALID_ARGUMENT, http: 400 },
  account_invalid: { grpc: GrpcStatus.UNAUTHENTICATED, http: 401 },
  negative_balance: { grpc: GrpcStatus.FAILED_PRECONDITION, http: 402 },
  spending_limit_exceeded: { grpc: GrpcStatus.FAILED_PRECONDITION, http: 402 },
  suspended_account: { grpc: GrpcStatus.PERMISSION_DENIED, http: 403 },
  internal_server_error: { grpc: GrpcStatus.INTERNAL, http: 500 },
  // V1 switched off after its sunset (V1_AFTER_SUNSET=gone).
  gone: { grpc: GrpcStatus.UNIMPLEMENTED, http: 410 },
  // Any family: a route or resource that does not exist, and Redis out of reach.
  not_found: { grpc: GrpcStatus.NOT_FOUND, http: 404 },
  method_not_allowed: { grpc: GrpcStatus.UNIMPLEMENTED, http: 405 },
  payload_too_large: { grpc: GrpcStatus.INVALID_ARGUMENT, http: 413 },
  unsupported_media_type: { grpc: GrpcStatus.INVALID_ARGUMENT, http: 415 },
  unavailable: { grpc: GrpcStatus.UNAVAILABLE, http: 503 },
  // Session service management calls: a missing or wrong management key (decisions section 5).
  unauthorized: { grpc: GrpcStatus.UNAUTHENTICATED, http: 401 },
  // Session service (decisions section 5): `{code, message}` bodies.
  invalid_token: { grpc: GrpcStatus.UNAUTHENTICATED, http: 401 },
  insufficient_scope: { grpc: GrpcStatus.PERMISSION_DENIED, http: 403 },
  scope_not_allowed: { grpc: GrpcStatus.PERMISSION_DENIED, http: 403 },
  invalid_stepup_config: { grpc: GrpcStatus.INVALID_ARGUMENT, http: 400 },
  invalid_code: { grpc: GrpcStatus.INVALID_ARGUMENT, http: 400 },
  expired_challenge: { grpc: GrpcStatus.FAILED_PRECONDITION, http: 400 },
  too_many_attempts: { grpc: GrpcStatus.RESOURCE_EXHAUSTED, http: 429 },
  // A login or step-up SMS to a number the spam rules refuse (premium-rate, disposable, bursts).
  spam_detected: { grpc: GrpcStatus.PERMISSION_DENIED, http: 403 },
  // Token endpoint, RFC 6749 section 5.2 (decisions section 5).
  invalid_request: { grpc: GrpcStatus.INVALID_ARGUMENT, http: 400 },
  invalid_client: { grpc: GrpcStatus.UNAUTHENTICATED, http: 401 },
  invalid_grant: { grpc: GrpcStatus.INVALID_ARGUMENT, http: 400 },
  unauthorized_client: { grpc: GrpcStatus.PERMISSION_DENIED, http: 400 },
  unsupported_grant_type: { grpc: GrpcStatus.INVALID_ARGUMENT, http: 400 },
  invalid_scope: { grpc: GrpcStatus.INVALID_ARGUMENT, http: 400 },
} as const satisfies Record<string, { grpc: GrpcStatus; http: number }>;

export type ErrorCode = keyof typeof ERRORS;

/** The V1 codes of the specification's error enum, plus the decided `bad_request` extension. */
export const V1_ERROR_CODES = [
  "account_invalid",
  "internal_server_error",
  "invalid_phone_number",
  "negative_balance",
  "spending_limit_exceeded",
  "suspended_account",
  "unsupported_region",
  "bad_request",
] as const satisfies readonly ErrorCode[];

/** The RFC 6749 section 5.2 error codes of the token endpoint. */
export const OAUTH_ERROR_CODES = [
  "invalid_request",
  "invalid_client",
  "invalid_grant",
  "unauthorized_client",
  "unsupported_grant_type",
  "invalid_scope",
] as const satisfies readonly ErrorCode[];

/**
 * Body shapes of the API families: V1 `{code, message, doc_url}`, session `{code, message}`,
 * OAuth token endpoint `{error, error_description}`.
 */
export type ErrorDialect = "v1" | "session" | "oauth";

export class RingfenceError extends Error {
  override readonly name = "RingfenceError";
  constructor(
    readonly code: ErrorCode,
    message: string,
    /** Response headers that belong to this error (for example `Retry-After`). */
    readonly headers: Readonly<Record<string, string>> = {},
    /** Extra body fields of the session family (for example `field`). */
    readonly details: Readonly<Record<string, string>> = {},
  ) {
    super(message);
  }
}

/**
 * A request field that broke a rule: 400 `bad_request`, the message starting with the field as
 * callers spell it, and `field` in session-family bodies.
 */
export function badField(field: string, message: string): RingfenceError {
  return new RingfenceError("bad_request", `${field}: ${message}`, {}, { field });
}

/** The first issue of a failed zod parse of a decoded request, its path in snake_case. */
export function badInput(error: ZodError): RingfenceError {
  const issue = error.issues[0];
  const field = (issue?.path ?? [])
    .map((p) => String(p).replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`))
    .join(".");
  return badField(field, issue?.message ?? "is invalid");
}

/** The most of one input value that a message quotes (see `quote`). */
export const MAX_QUOTED_CHARS = 64;
/** The longest message, and body field, a caller ever receives, whatever the error quotes. */
export const MAX_MESSAGE_CHARS = 256;

/**
 * An input value as an error message quotes it: JSON-quoted (control characters escaped) and cut
 * to its first characters, so a huge input never comes back whole.
 */
export function quote(value: string): string {
  return JSON.stringify(clip(value));
}

/** `text` when short enough, else its first `max - 1` characters and an ellipsis. */
export function clip(text: string, max = MAX_QUOTED_CHARS): string {
  if (text.length <= max) return text;
  // Never leave half of a surrogate pair at the cut.
  return `${text.slice(0, max - 1).replace(/[\uD800-\uDBFF]$/, "")}\u2026`;
}

export interface WireError {
  grpcStatus: GrpcStatus;
  httpStatus: number;
  message: string;
  body: Record<string, unknown>;
  headers: Record<string, string>;
}

/** Codes whose V1 body code differs from the internal one (V1 has a closed enum). */
const V1_BODY_CODE: Partial<Record<ErrorCode, string>> = {
  unavailable: "internal_server_error",
  not_found: "bad_request",
  method_not_allowed: "bad_request",
  payload_too_large: "bad_request",
  unsupported_media_type: "bad_request",
};

/** What other codes become at the token endpoint, whose error codes are RFC 6749's. */
const OAUTH_BODY_CODE: Partial<Record<ErrorCode, string>> = {
  internal_server_error: "server_error",
  unavailable: "temporarily_unavailable",
  too_many_attempts: "too_many_attempts",
};

/**
 * The one place where an error becomes what a caller receives, over gRPC and over HTTP. Messages
 * and body fields are cut to MAX_MESSAGE_CHARS, so no answer (nor grpc-message trailer, nor
 * x-http-body marker) can repeat a large input.
 */
export function toWire(err: unknown, dialect: ErrorDialect, docsUrl: string): WireError {
  const e = asRingfenceError(err);
  const { grpc, http } = ERRORS[e.code];
  const message = clip(e.message, MAX_MESSAGE_CHARS);
  let body: Record<string, unknown>;
  if (dialect === "v1") {
    const code = V1_BODY_CODE[e.code] ?? e.code;
    body = { code, message, doc_url: `${docsUrl}/errors#${code}` };
  } else if (dialect === "oauth") {
    const oauth = (OAUTH_ERROR_CODES as readonly string[]).includes(e.code);
    body = {
      error: oauth ? e.code : (OAUTH_BODY_CODE[e.code] ?? "invalid_request"),
      error_description: message,
    };
  } else {
    const details = Object.entries(e.details).map(([k, v]) => [k, clip(v, MAX_MESSAGE_CHARS)] as const);
    body = { code: e.code, message, ...Object.fromEntries(details) };
  }
  return { grpcStatus: grpc, httpStatus: http, message, body, headers: { ...e.headers } };
}

/** Unknown failures become a 500 whose message reveals nothing; Redis outages a 503. */
export function asRingfenceError(err: unknown): RingfenceError {
  if (err instanceof RingfenceError) return err;
  if (isRedisUnavailable(err)) {
    return new RingfenceError("unavailable", "The service is temporarily unavailable, try again shortly", {
      "retry-after": "5",
    });
  }
  return new RingfenceError("internal_server_error", "Internal server error");
}

/**
 * Every way ioredis, its Cluster client, BullMQ or Redis itself say the server is unreachable,
 * hung, restarting, loading or failing over. Looks through `cause` and aggregated errors too.
 */
const REDIS_UNAVAILABLE =
  /Command timed out|Connection is closed|Stream isn't writeable|enableOfflineQueue|Reached the max retries|ECONNREFUSED|ECONNRESET|EPIPE|ETIMEDOUT|EHOSTUNREACH|ENOTCONN|^LOADING|^CLUSTERDOWN|^TRYAGAIN|^MASTERDOWN|^READONLY|^BUSY |ClusterAllFailedError|Failed to refresh slots cache|None of startup nodes is available|Too many Cluster redirections|Redis is not answering|Redis is not reachable/;
const REDIS_UNAVAILABLE_NAMES = new Set(["MaxRetriesPerRequestError", "ClusterAllFailedError"]);

export function isRedisUnavailable(err: unknown, depth = 0): boolean {
  if (!(err instanceof Error) || depth > 4) return false;
  // A message provider that is unreachable says ECONNREFUSED too: that is not Redis.
  if (err.name === "DeliveryError") return false;
  if (REDIS_UNAVAILABLE_NAMES.has(err.name) || REDIS_UNAVAILABLE.test(err.message)) return true;
  const code = (err as { code?: unknown }).code;
  if (typeof code === "string" && /^(ECONNREFUSED|ECONNRESET|EPIPE|ETIMEDOUT|EHOSTUNREACH)$/.test(code))
    return true;
  const nested = [
    err.cause,
    (err as { lastNodeError?: unknown }).lastNodeError,
    ...(err instanceof AggregateError ? (err.errors as unknown[]) : []),
  ];
  return nested.some((e) => isRedisUnavailable(e, depth + 1));
}
