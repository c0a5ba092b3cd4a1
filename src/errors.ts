import { status as GrpcStatus } from "@grpc/grpc-js";
import type { ZodError } from "zod";

/**
 * Every error a caller can see, keyed by its stable code. Each code maps once to a gRPC status
 * and an HTTP status; the body shape depends on the API family (see `ErrorDialect`).
 */
export const ERRORS = {
  // V1 phone API (docs/v1-errors.md#codes-answered-with-400): the original SDKs read an error body only from a
  // 400 answer, so every code of their published list answers 400; the gRPC status keeps the
  // meaning. The finer codes are the original API's, used wherever a condition matches one.
  account_invalid: { grpc: GrpcStatus.UNAUTHENTICATED, http: 400 },
  invalid_phone_number: { grpc: GrpcStatus.INVALID_ARGUMENT, http: 400 },
  unsupported_region: { grpc: GrpcStatus.INVALID_ARGUMENT, http: 400 },
  negative_balance: { grpc: GrpcStatus.FAILED_PRECONDITION, http: 400 },
  suspended_account: { grpc: GrpcStatus.PERMISSION_DENIED, http: 400 },
  bad_request: { grpc: GrpcStatus.INVALID_ARGUMENT, http: 400 },
  invalid_auth_uuid: { grpc: GrpcStatus.INVALID_ARGUMENT, http: 400 },
  no_associated_auth_found: { grpc: GrpcStatus.NOT_FOUND, http: 400 },
  invalid_template_id: { grpc: GrpcStatus.INVALID_ARGUMENT, http: 400 },
  invalid_sender_id: { grpc: GrpcStatus.INVALID_ARGUMENT, http: 400 },
  unauthorized_sender_id: { grpc: GrpcStatus.PERMISSION_DENIED, http: 400 },
  invalid_app_realm: { grpc: GrpcStatus.INVALID_ARGUMENT, http: 400 },
  app_realm_require_device_type: { grpc: GrpcStatus.INVALID_ARGUMENT, http: 400 },
  unsupported_app_realm_device_type: { grpc: GrpcStatus.INVALID_ARGUMENT, http: 400 },
  invalid_device_id: { grpc: GrpcStatus.INVALID_ARGUMENT, http: 400 },
  invalid_device_model: { grpc: GrpcStatus.INVALID_ARGUMENT, http: 400 },
  invalid_os_version: { grpc: GrpcStatus.INVALID_ARGUMENT, http: 400 },
  invalid_app_version: { grpc: GrpcStatus.INVALID_ARGUMENT, http: 400 },
  invalid_feedback_status: { grpc: GrpcStatus.INVALID_ARGUMENT, http: 400 },
  duplicated_feedback_status: { grpc: GrpcStatus.ALREADY_EXISTS, http: 400 },
  blocked_number: { grpc: GrpcStatus.PERMISSION_DENIED, http: 400 },
  invalid_line: { grpc: GrpcStatus.INVALID_ARGUMENT, http: 400 },
  // V1 codes outside the SDKs' 400 list keep their own status, so strict clients see a plain
  // HTTP error rather than a body they would refuse.
  spending_limit_exceeded: { grpc: GrpcStatus.FAILED_PRECONDITION, http: 402 },
  internal_server_error: { grpc: GrpcStatus.INTERNAL, http: 500 },
  // V2 verify and lookup (docs/v2-api.md#errors): the original V2 API's codes where V1 has none.
  invalid_api_key: { grpc: GrpcStatus.UNAUTHENTICATED, http: 401 },
  email_verification_not_allowed: { grpc: GrpcStatus.PERMISSION_DENIED, http: 403 },
  custom_code_not_allowed: { grpc: GrpcStatus.PERMISSION_DENIED, http: 403 },
  channel_not_enabled_in_region: { grpc: GrpcStatus.INVALID_ARGUMENT, http: 400 },
  invalid_code_size: { grpc: GrpcStatus.INVALID_ARGUMENT, http: 400 },
  invalid_callback_url: { grpc: GrpcStatus.INVALID_ARGUMENT, http: 400 },
  invalid_locale: { grpc: GrpcStatus.INVALID_ARGUMENT, http: 400 },
  invalid_correlation_id: { grpc: GrpcStatus.INVALID_ARGUMENT, http: 400 },
  invalid_template_variables: { grpc: GrpcStatus.INVALID_ARGUMENT, http: 400 },
  invalid_app_realm_platform: { grpc: GrpcStatus.INVALID_ARGUMENT, http: 400 },
  invalid_app_realm_value: { grpc: GrpcStatus.INVALID_ARGUMENT, http: 400 },
  // V1 switched off after its sunset (V1_AFTER_SUNSET=gone).
  gone: { grpc: GrpcStatus.UNIMPLEMENTED, http: 410 },
  // Any family: a route or resource that does not exist, and Redis out of reach.
  not_found: { grpc: GrpcStatus.NOT_FOUND, http: 404 },
  method_not_allowed: { grpc: GrpcStatus.UNIMPLEMENTED, http: 405 },
  payload_too_large: { grpc: GrpcStatus.INVALID_ARGUMENT, http: 413 },
  unsupported_media_type: { grpc: GrpcStatus.INVALID_ARGUMENT, http: 415 },
  unavailable: { grpc: GrpcStatus.UNAVAILABLE, http: 503 },
  // The call's deadline (a gRPC deadline, `grpc-timeout` through a gateway) passed before it was
  // answered; nothing is sent or charged past it.
  deadline_exceeded: { grpc: GrpcStatus.DEADLINE_EXCEEDED, http: 504 },
  // Session service management calls: a missing or wrong management key (docs/session-api.md#session-errors).
  unauthorized: { grpc: GrpcStatus.UNAUTHENTICATED, http: 401 },
  // Session service (docs/session-api.md#session-errors): `{code, message}` bodies.
  invalid_token: { grpc: GrpcStatus.UNAUTHENTICATED, http: 401 },
  // A password login whose identifier, user or password is wrong: one answer for all three.
  invalid_credentials: { grpc: GrpcStatus.UNAUTHENTICATED, http: 401 },
  insufficient_scope: { grpc: GrpcStatus.PERMISSION_DENIED, http: 403 },
  // A secret that is not one the call takes, where the caller's protocol expects 403 (the WhatsApp
  // webhook's subscription handshake with a wrong verify token).
  forbidden: { grpc: GrpcStatus.PERMISSION_DENIED, http: 403 },
  scope_not_allowed: { grpc: GrpcStatus.PERMISSION_DENIED, http: 403 },
  // A passkey call for an app whose operator set no relying party (`ringfence apps passkeys`).
  passkeys_not_configured: { grpc: GrpcStatus.FAILED_PRECONDITION, http: 400 },
  invalid_stepup_config: { grpc: GrpcStatus.INVALID_ARGUMENT, http: 400 },
  invalid_code: { grpc: GrpcStatus.INVALID_ARGUMENT, http: 400 },
  expired_challenge: { grpc: GrpcStatus.FAILED_PRECONDITION, http: 400 },
  too_many_attempts: { grpc: GrpcStatus.RESOURCE_EXHAUSTED, http: 429 },
  // A login or step-up SMS to a number the spam rules refuse (premium-rate, disposable, bursts).
  spam_detected: { grpc: GrpcStatus.PERMISSION_DENIED, http: 403 },
  // Token endpoint, RFC 6749 section 5.2 (docs/session-api.md#token-errors).
  invalid_request: { grpc: GrpcStatus.INVALID_ARGUMENT, http: 400 },
  invalid_client: { grpc: GrpcStatus.UNAUTHENTICATED, http: 401 },
  invalid_grant: { grpc: GrpcStatus.INVALID_ARGUMENT, http: 400 },
  unauthorized_client: { grpc: GrpcStatus.PERMISSION_DENIED, http: 400 },
  unsupported_grant_type: { grpc: GrpcStatus.INVALID_ARGUMENT, http: 400 },
  invalid_scope: { grpc: GrpcStatus.INVALID_ARGUMENT, http: 400 },
  // RFC 9449 section 5: a DPoP proof the token endpoint does not accept.
  invalid_dpop_proof: { grpc: GrpcStatus.INVALID_ARGUMENT, http: 400 },
} as const satisfies Record<string, { grpc: GrpcStatus; http: number }>;

export type ErrorCode = keyof typeof ERRORS;

/**
 * The codes of the original SDKs' published error list that V1 answers with 400
 * (docs/v1-errors.md#codes-answered-with-400). `internal_server_error` is in the SDKs' list too, but keeps 500.
 */
export const V1_ERROR_CODES = [
  "account_invalid",
  "invalid_phone_number",
  "unsupported_region",
  "negative_balance",
  "suspended_account",
  "bad_request",
  "invalid_auth_uuid",
  "no_associated_auth_found",
  "invalid_template_id",
  "invalid_sender_id",
  "unauthorized_sender_id",
  "invalid_app_realm",
  "app_realm_require_device_type",
  "unsupported_app_realm_device_type",
  "invalid_device_id",
  "invalid_device_model",
  "invalid_os_version",
  "invalid_app_version",
  "invalid_feedback_status",
  "duplicated_feedback_status",
  "blocked_number",
  "invalid_line",
] as const satisfies readonly ErrorCode[];

/** V1 codes with a status of their own (docs/v1-errors.md#codes-with-their-own-status). */
export const V1_OTHER_CODES = [
  "spending_limit_exceeded",
  "gone",
  "internal_server_error",
] as const satisfies readonly ErrorCode[];

/** The RFC 6749 section 5.2 error codes of the token endpoint. */
export const OAUTH_ERROR_CODES = [
  "invalid_request",
  "invalid_client",
  "invalid_grant",
  "unauthorized_client",
  "unsupported_grant_type",
  "invalid_scope",
  "invalid_dpop_proof",
] as const satisfies readonly ErrorCode[];

/**
 * What the V2 body says for codes the V2 API names otherwise (docs/v2-api.md#errors): the
 * engine's refusals are shared with V1, their V2 names are the original V2 API's.
 */
const V2_BODY_CODE: Partial<Record<ErrorCode, string>> = {
  bad_request: "invalid_request",
  account_invalid: "invalid_api_key",
  negative_balance: "insufficient_balance",
  spending_limit_exceeded: "insufficient_balance",
  unsupported_region: "unsupported_country",
  unauthorized_sender_id: "invalid_sender_id",
  invalid_app_realm: "invalid_app_realm_value",
  invalid_app_version: "invalid_request",
  invalid_device_model: "invalid_request",
  internal_server_error: "internal",
};

/**
 * V2 codes whose status is not that of the shared code behind them: money refusals are 402, and
 * a suspended account is 403 `forbidden` (V1 keeps the 400 its SDKs read).
 */
const V2_BODY_STATUS: Partial<Record<string, number>> = {
  insufficient_balance: 402,
  suspended_account: 403,
};

/** The HTTP status of each V2 answer that can be refused, as the V2 body's `type` names it. */
export const V2_ERROR_TYPES: Readonly<Record<number, string>> = {
  400: "bad_request",
  401: "unauthorized",
  402: "payment_required",
  403: "forbidden",
  404: "not_found",
  405: "method_not_allowed",
  409: "conflict",
  410: "gone",
  413: "payload_too_large",
  415: "unsupported_media_type",
  429: "too_many_requests",
  500: "internal",
  503: "unavailable",
  504: "deadline_exceeded",
};

/** Every code a V2 body carries (docs/v2-api.md#errors): a closed list, as V1's. */
export const V2_ERROR_CODES = [
  "invalid_request",
  "invalid_api_key",
  "suspended_account",
  "insufficient_balance",
  "invalid_phone_number",
  "unsupported_country",
  "invalid_sender_id",
  "invalid_template_id",
  "invalid_app_realm",
  "invalid_app_realm_platform",
  "invalid_app_realm_value",
  "invalid_device_id",
  "invalid_os_version",
  "invalid_locale",
  "invalid_callback_url",
  "invalid_code_size",
  "invalid_correlation_id",
  "invalid_template_variables",
  "custom_code_not_allowed",
  "email_verification_not_allowed",
  "channel_not_enabled_in_region",
  "not_found",
  "method_not_allowed",
  "payload_too_large",
  "unsupported_media_type",
  "too_many_attempts",
  "internal",
  "unavailable",
  "deadline_exceeded",
] as const;

/**
 * A V2 body's code and HTTP status: the V2 name of the code with its own status (402 for
 * money, 403 for a suspended account); a code V2 does not name becomes `invalid_request` (4xx)
 * or `internal` (5xx).
 */
function v2Answer(code: ErrorCode): { code: string; http: number } {
  const named = V2_BODY_CODE[code] ?? code;
  const own = V2_BODY_STATUS[named];
  if (own !== undefined) return { code: named, http: own };
  if ((V2_ERROR_CODES as readonly string[]).includes(named)) return { code: named, http: ERRORS[code].http };
  return ERRORS[code].http >= 500
    ? { code: "internal", http: ERRORS.internal_server_error.http }
    : { code: "invalid_request", http: ERRORS.bad_request.http };
}

/**
 * Body shapes of the API families: V1 `{code, message, doc_url}`, V2 `{code, message, type,
 * request_id, param?}`, session `{code, message}`, OAuth token endpoint `{error, error_description}`.
 */
export type ErrorDialect = "v1" | "v2" | "session" | "oauth";

export class RingfenceError extends Error {
  override readonly name = "RingfenceError";
  /**
   * The abuse rule that refused the call, named by its setting (`RATE_LIMIT_NUMBER`,
   * `TOKEN_FAILURES_IP`, ...), for the refusals metric and the request log. Set with `refusedBy`.
   */
  refusedBy?: string;
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

/** `error`, naming the abuse rule (its setting) that refused the call, when there is one. */
export function refusedBy<E extends RingfenceError>(rule: string | undefined, error: E): E {
  if (rule !== undefined) error.refusedBy ??= rule;
  return error;
}

/**
 * A request field that broke a rule: 400 `bad_request` (or the finer code given), the message
 * starting with the field as callers spell it, and `field` in session-family bodies.
 */
export function badField(field: string, message: string, code: ErrorCode = "bad_request"): RingfenceError {
  return new RingfenceError(code, `${field}: ${message}`, {}, { field });
}

/**
 * The first issue of a failed zod parse of a decoded request, its path in snake_case; `codes`
 * names the finer code of a field, when its API has one.
 */
export function badInput(error: ZodError, codes: Readonly<Record<string, ErrorCode>> = {}): RingfenceError {
  const issue = error.issues[0];
  const field = (issue?.path ?? [])
    .map((p) => String(p).replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`))
    .join(".");
  return badField(field, issue?.message ?? "is invalid", codes[field]);
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
  /** The stable code behind the answer (the V1 and OAuth bodies may show another). */
  code: ErrorCode;
  grpcStatus: GrpcStatus;
  httpStatus: number;
  message: string;
  body: Record<string, unknown>;
  headers: Record<string, string>;
  /** What the error names beyond its message (`field`), whatever the body family shows. */
  details: Record<string, string>;
}

/**
 * The code and HTTP status of a V1 body. V1's codes are a closed list: a shared code (a route
 * that does not exist, a body too large, Redis out of reach) takes the V1 code that says as much,
 * and with it that code's status, except that an outage keeps its 503 and a deadline its 504.
 */
function v1Answer(code: ErrorCode): { code: string; http: number } {
  const own: readonly string[] = [...V1_ERROR_CODES, ...V1_OTHER_CODES];
  if (own.includes(code)) return { code, http: ERRORS[code].http };
  if (code === "unavailable" || code === "deadline_exceeded")
    return { code: "internal_server_error", http: ERRORS[code].http };
  if (ERRORS[code].http >= 500)
    return { code: "internal_server_error", http: ERRORS.internal_server_error.http };
  return { code: "bad_request", http: ERRORS.bad_request.http };
}

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
export function toWire(
  err: unknown,
  dialect: ErrorDialect,
  docsUrl: string,
  /** The call's request id, which V2 bodies carry. */
  requestId = "",
): WireError {
  const e = asRingfenceError(err);
  const { grpc } = ERRORS[e.code];
  let http: number = ERRORS[e.code].http;
  const message = clip(e.message, MAX_MESSAGE_CHARS);
  const details = Object.fromEntries(
    Object.entries(e.details).map(([k, v]) => [k, clip(v, MAX_MESSAGE_CHARS)] as const),
  );
  let body: Record<string, unknown>;
  if (dialect === "v1") {
    const answer = v1Answer(e.code);
    http = answer.http;
    body = { code: answer.code, message, doc_url: `${docsUrl}/errors#${answer.code}` };
  } else if (dialect === "v2") {
    const answer = v2Answer(e.code);
    http = answer.http;
    body = {
      code: answer.code,
      message,
      type: V2_ERROR_TYPES[http] ?? (http >= 500 ? "internal" : "bad_request"),
      request_id: requestId,
      ...(details.field === undefined ? {} : { param: details.field }),
    };
  } else if (dialect === "oauth") {
    const oauth = (OAUTH_ERROR_CODES as readonly string[]).includes(e.code);
    body = {
      error: oauth ? e.code : (OAUTH_BODY_CODE[e.code] ?? "invalid_request"),
      error_description: message,
    };
  } else {
    body = { code: e.code, message, ...details };
  }
  return {
    code: e.code,
    grpcStatus: grpc,
    httpStatus: http,
    message,
    body,
    headers: { ...e.headers },
    details,
  };
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
