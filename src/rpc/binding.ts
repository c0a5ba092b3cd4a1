import type { MethodDefinition, ServiceDefinition } from "@grpc/grpc-js";
import { isRedisUnavailable, RingfenceError, toWire, type ErrorDialect, type WireError } from "../errors.js";
import type { Logger } from "../log.js";

/** What a handler sees of the call, whichever transport carried it. */
export interface CallContext {
  /** An incoming metadata entry (an HTTP header through the gateways); names are lower-case. */
  header(name: string): string | undefined;
  /** A response header: initial metadata over gRPC, an HTTP header through the gateways. */
  setHeader(name: string, value: string): void;
  /** The caller's IP address as the transport saw it (behind a trusted proxy: the client it saw). */
  readonly clientAddress?: string | undefined;
}

export type UnaryHandler<Req, Res> = (request: Req, ctx: CallContext) => Promise<Res>;

/** One handler per method of a ts-proto grpc-js service definition, typed from it. */
export type Handlers<S extends ServiceDefinition> = {
  [K in keyof S]: S[K] extends MethodDefinition<infer Req, infer Res> ? UnaryHandler<Req, Res> : never;
};

/** A service as both transports serve it: its definition, handlers and answer conventions. */
export interface ServiceBinding {
  readonly definition: ServiceDefinition;
  /** Fully qualified proto name, e.g. `ringfence.lookup.v1.LookupService`. */
  readonly serviceName: string;
  /** The error body family of a method. */
  readonly dialectOf: (method: string) => ErrorDialect;
  /** Response headers on every answer, success or error (V1 deprecation headers). */
  readonly headers: Readonly<Record<string, string>>;
  /** Runs before every handler; throws to refuse the call (V1 after its sunset). */
  readonly guard: () => void;
  readonly handlers: Readonly<Record<string, UnaryHandler<unknown, unknown>>>;
}

export function bindService<S extends ServiceDefinition>(
  definition: S,
  handlers: Handlers<S>,
  options: {
    dialect: ErrorDialect;
    /** Methods whose errors take another family (the token endpoint among management calls). */
    methodDialects?: Partial<Record<keyof S & string, ErrorDialect>>;
    headers?: Record<string, string>;
    guard?: () => void;
  },
): ServiceBinding {
  const first = Object.values(definition)[0];
  if (first === undefined) throw new Error("a service without methods cannot be served");
  return {
    definition,
    serviceName: first.path.split("/")[1] ?? "",
    dialectOf: (method) => options.methodDialects?.[method] ?? options.dialect,
    headers: options.headers ?? {},
    guard: options.guard ?? (() => undefined),
    handlers,
  };
}

/** RFC 6749 section 5.1: an answer that carries a token or credential is never cached. */
export function noStore(ctx: CallContext): void {
  ctx.setHeader("cache-control", "no-store");
  ctx.setHeader("pragma", "no-cache");
}

/** A header that carries an HTTP status, on success (201, 204) or on error (decisions section 6). */
export const HTTP_STATUS_MARKER = "x-http-status";
/** A trailers-only header that carries the exact JSON error body. */
export const HTTP_BODY_MARKER = "x-http-body";

/**
 * What a transport passes as the request when it could not decode the caller's bytes, so the
 * refusal goes through the same guard and error mapping as any other call.
 */
export class UndecodableRequest {
  constructor(readonly reason: string) {}
}

export type Outcome =
  | { ok: true; response: unknown; headers: Record<string, string> }
  | { ok: false; error: WireError; headers: Record<string, string> };

/**
 * Runs one call the same way for every transport: the binding's headers and guard, the
 * handler, and the one error mapping. Unexpected failures are logged, never shown.
 */
export async function invoke(
  binding: ServiceBinding,
  method: string,
  request: unknown,
  incoming: (name: string) => string | undefined,
  deps: { log: Logger; docsUrl: string },
  clientAddress?: string,
): Promise<Outcome> {
  const headers: Record<string, string> = { ...binding.headers };
  const ctx: CallContext = {
    clientAddress,
    header: incoming,
    setHeader: (name, value) => {
      headers[name.toLowerCase()] = value;
    },
  };
  try {
    const handler = binding.handlers[method];
    if (handler === undefined) throw new RingfenceError("method_not_allowed", `unknown method ${method}`);
    binding.guard();
    if (request instanceof UndecodableRequest) {
      throw new RingfenceError(
        "bad_request",
        `the request is not a valid protobuf message: ${request.reason}`,
      );
    }
    return { ok: true, response: await handler(request, ctx), headers };
  } catch (err) {
    const error = toWire(err, binding.dialectOf(method), deps.docsUrl);
    if (isRedisUnavailable(err)) {
      // An outage, answered 503 and reported by the health watchdog: not a failure of this call.
      deps.log.warn("call failed: redis unavailable", {
        method: `${binding.serviceName}/${method}`,
        error: err instanceof Error ? `${err.name}: ${err.message}` : String(err),
      });
    } else if (!(err instanceof RingfenceError)) {
      deps.log.error("call failed", {
        method: `${binding.serviceName}/${method}`,
        error: err instanceof Error ? `${err.name}: ${err.message}` : String(err),
      });
    }
    // Headers set by the handler before it failed (other than a success status) still apply.
    const { [HTTP_STATUS_MARKER]: _ignored, ...kept } = headers;
    return { ok: false, error, headers: { ...kept, ...error.headers } };
  }
}
