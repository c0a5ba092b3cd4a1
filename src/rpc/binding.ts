import type { MethodDefinition, ServiceDefinition } from "@grpc/grpc-js";
import { SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import { isRedisUnavailable, RingfenceError, toWire, type WireError } from "../errors.js";
import { withFields, type Logger } from "../log.js";
import {
  callerIdentity,
  elapsedMs,
  REQUEST_ID_HEADER,
  type CallNotes,
  type CallObserver,
  type CallRecord,
  type CallScope,
  type Transport,
} from "../observability/calls.js";
import type { Caller, CallerKey } from "./callers.js";
import { readSurface, type DeclaredService, type Surface } from "./surface.js";
import { andThen, settle, type Awaitable } from "../awaitable.js";
import { tracingStarted } from "../observability/tracing.js";

/**
 * What a handler sees of the call, whichever transport carried it. It is the call's scope too
 * (its log and deadline): a handler hands it to the code that needs them.
 */
export interface CallContext extends CallScope {
  /** An incoming metadata entry (an HTTP header through the gateways); names are lower-case. */
  header(name: string): string | undefined;
  /** A response header: initial metadata over gRPC, an HTTP header through the gateways. */
  setHeader(name: string, value: string): void;
  /** The caller's IP address as the transport saw it (behind a trusted proxy: the client it saw). */
  readonly clientAddress?: string | undefined;
  /**
   * Who calls, as the binding's authentication chain of the method's caller kind found it, under
   * that kind's key; undefined for a public method. Read it with `callerOf`.
   */
  readonly caller?: Caller | undefined;
  /** The call's request id (the caller's `x-request-id`, or one made for it), for logs. */
  readonly requestId: string;
}

/**
 * Finds who calls, from the call's headers (and, for an id the request carries, the request),
 * or refuses with the service's error. Declared per method beside the binding.
 */
export type Authenticator<C = unknown> = (ctx: CallContext, request: unknown) => Awaitable<C>;

/** An authentication chain and the key of the caller it finds (src/rpc/callers.ts). */
export interface CallerAuthenticator<T> {
  readonly key: CallerKey<T>;
  readonly authenticate: Authenticator<T>;
}

export function keyed<T>(key: CallerKey<T>, authenticate: Authenticator<T>): CallerAuthenticator<T> {
  return { key, authenticate };
}

/**
 * The caller the binding put on the context under `key`; throws when the method declares another
 * kind, or none, in its domain's surface (src/rpc/surface.ts; a wiring mistake).
 */
export function callerOf<T>(ctx: CallContext, key: CallerKey<T>): T {
  const caller = ctx.caller;
  if (caller?.key !== key) throw new Error(`no ${key.kind} caller on the call: declare it for the method`);
  return caller.who as T;
}

/** One authentication chain for each kind of caller a service's methods declare, by kind. */
export type AuthenticatorsByKind = Readonly<Record<string, CallerAuthenticator<unknown>>>;

export type UnaryHandler<Req, Res> = (request: Req, ctx: CallContext) => Awaitable<Res>;

/** One handler per method of a ts-proto grpc-js service definition, typed from it. */
export type Handlers<S extends ServiceDefinition> = {
  [K in keyof S]: S[K] extends MethodDefinition<infer Req, infer Res> ? UnaryHandler<Req, Res> : never;
};

/** The handlers one module brings for the methods `M` of a service: its part of the binding. */
export type HandlerSet<S extends ServiceDefinition, M extends keyof S> = Pick<Handlers<S>, M>;

/** The methods of `S` that none of `sets` brings. */
type Unbrought<S, Sets extends readonly object[]> = Exclude<
  keyof S,
  Sets[number] extends infer T ? (T extends unknown ? keyof T : never) : never
>;

/**
 * One service's handlers from the sets several modules bring (src/apps/ brings the app
 * operations of the session and OAuth contracts): the result is only a `Handlers<S>` when
 * together they cover every method, and a method brought twice fails at start.
 */
export function handlersOf<S extends ServiceDefinition, const Sets extends readonly Partial<Handlers<S>>[]>(
  definition: S,
  ...sets: Sets
): [Unbrought<S, Sets>] extends [never] ? Handlers<S> : { missing: Unbrought<S, Sets> } {
  const out: Record<string, unknown> = {};
  for (const set of sets) {
    for (const [method, handler] of Object.entries(set)) {
      if (method in out) throw new Error(`${method} is brought by two handler sets`);
      out[method] = handler;
    }
  }
  for (const method of Object.keys(definition)) {
    if (!(method in out)) throw new Error(`${method}: no handler set brings it`);
  }
  return out as [Unbrought<S, Sets>] extends [never] ? Handlers<S> : { missing: Unbrought<S, Sets> };
}

/**
 * A service as both transports serve it: its definition, handlers and answer conventions, and
 * what its domain declares of its REST surface (src/rpc/surface.ts).
 */
export interface ServiceBinding extends DeclaredService {
  readonly definition: ServiceDefinition;
  /** Response headers on every answer, success or error (V1 deprecation headers). */
  readonly headers: Readonly<Record<string, string>>;
  /** Runs before every handler; throws to refuse the call (V1 after its sunset). */
  readonly guard: () => void;
  /** Who may call a method: the chain of its caller kind, or undefined for a public method. */
  readonly authenticatorOf: (method: string) => Authenticator<Caller> | undefined;
  readonly handlers: Readonly<Record<string, UnaryHandler<unknown, unknown>>>;
}

export function bindService<S extends ServiceDefinition>(
  definition: S,
  handlers: Handlers<S>,
  /** What the domain declares (its `surface.ts`), with what the service needs to run. */
  options: Surface<S> & {
    headers?: Record<string, string>;
    guard?: () => void;
    /** The chain of each kind `callers` names; a kind without one fails here, at start. */
    authenticators?: AuthenticatorsByKind;
    /** A method whose caller of its kind is found another way (the V1 read-back: its key alone). */
    methodAuthenticators?: Partial<Record<keyof S & string, CallerAuthenticator<unknown>>>;
  },
): ServiceBinding {
  const declared = readSurface(definition, options);
  const chains = new Map<string, Authenticator<Caller>>();
  for (const [method, kind] of Object.entries(options.callers ?? {}) as [string, string][]) {
    const chain: CallerAuthenticator<unknown> | undefined =
      options.methodAuthenticators?.[method as keyof S & string] ?? options.authenticators?.[kind];
    if (chain === undefined) throw new Error(`${method}: no ${kind} authenticator`);
    if (chain.key.kind !== kind)
      throw new Error(`${method}: its ${kind} caller is authenticated as ${chain.key.kind}`);
    const { key, authenticate } = chain;
    chains.set(method, (ctx, request) =>
      andThen(authenticate(ctx, request), (who): Caller => ({ key, who })),
    );
  }
  return {
    ...declared,
    definition,
    headers: options.headers ?? {},
    guard: options.guard ?? (() => undefined),
    authenticatorOf: (method) => chains.get(method),
    handlers,
  };
}

/** RFC 6749 section 5.1: an answer that carries a token or credential is never cached. */
export function noStore(ctx: CallContext): void {
  ctx.setHeader("cache-control", "no-store");
  ctx.setHeader("pragma", "no-cache");
}

/** A header that carries an HTTP status, on success (201, 204) or on error (docs/gateway.md#http-markers). */
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

/** How a transport received a call, as `invoke` needs it. */
export interface Incoming {
  transport: Transport;
  /** An incoming metadata entry or HTTP header; names are lower-case. */
  header: (name: string) => string | undefined;
  clientAddress?: string | undefined;
  requestId: string;
  /** When the transport first saw the call (`process.hrtime.bigint()`), for its duration. */
  startedAt: bigint;
  /** When the caller stops waiting (epoch ms), if it said. */
  deadlineMs?: number | undefined;
}

export interface InvokeDeps {
  log: Logger;
  docsUrl: string;
  /** Told of every call once it is answered (metrics, the request log). */
  observe?: CallObserver | undefined;
}

/**
 * Runs one call the same way for every transport: the binding's headers and guard, the
 * handler, and the one error mapping. Unexpected failures are logged, never shown. Every answer
 * carries the call's request id, and the observer hears of it. A call its handler answers at
 * once is answered at once (no promise); see src/awaitable.ts.
 */
export function invoke(
  binding: ServiceBinding,
  method: string,
  request: unknown,
  call: Incoming,
  deps: InvokeDeps,
): Awaitable<Outcome> {
  const rpc = rpcName(binding, method);
  const notes: CallNotes = {
    requestId: call.requestId,
    method: `${binding.serviceName}/${rpc}`,
  };
  const answer = () => run(binding, method, rpc, request, call, deps, notes);
  return tracingStarted() ? traced(binding, rpc, call, notes, answer) : answer();
}

const tracer = trace.getTracer("ringfence");

/**
 * The call under a span of its own, when tracing runs: under the transport's server span, above
 * the Redis commands and outbound calls the handler makes.
 */
function traced(
  binding: ServiceBinding,
  rpc: string,
  call: Incoming,
  notes: CallNotes,
  answer: () => Awaitable<Outcome>,
): Promise<Outcome> {
  return tracer.startActiveSpan(
    notes.method,
    {
      kind: SpanKind.INTERNAL,
      attributes: {
        "rpc.system": "grpc",
        "rpc.service": binding.serviceName,
        "rpc.method": rpc,
        "ringfence.transport": call.transport,
        "ringfence.request_id": call.requestId,
      },
    },
    async (span) => {
      try {
        const outcome = await answer();
        span.setAttribute("ringfence.code", outcome.ok ? "ok" : outcome.error.code);
        if (!outcome.ok && outcome.error.httpStatus >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
        return outcome;
      } finally {
        span.end();
      }
    },
  );
}

function run(
  binding: ServiceBinding,
  method: string,
  rpc: string,
  request: unknown,
  call: Incoming,
  deps: InvokeDeps,
  notes: CallNotes,
): Awaitable<Outcome> {
  const headers: Record<string, string> = { ...binding.headers, [REQUEST_ID_HEADER]: call.requestId };
  const ctx: { -readonly [K in keyof CallContext]: CallContext[K] } = {
    clientAddress: call.clientAddress,
    header: call.header,
    requestId: call.requestId,
    deadlineMs: call.deadlineMs,
    setHeader: (name, value) => {
      headers[name.toLowerCase()] = value;
    },
    // A data member, not a getter made lazy: V8 runs a call whose context has an accessor far
    // slower (measured: 15 % fewer gRPC tokens a second), and this costs two small objects.
    log: withFields(deps.log, { request_id: notes.requestId, method: notes.method }),
    noteRefusal: (rule) => {
      notes.refusedBy ??= rule;
    },
  };
  let caller: Caller | undefined;
  let expiredOnArrival = false;
  const record = (answer: Pick<CallRecord, "code" | "grpcStatus" | "httpStatus">) => {
    deps.observe?.({
      transport: call.transport,
      service: binding.serviceName,
      method: rpc,
      ...answer,
      durationMs: elapsedMs(call.startedAt),
      requestId: call.requestId,
      caller: callerIdentity(caller),
      refusedBy: notes.refusedBy,
      ...(expiredOnArrival ? { deadlineExpiredOnArrival: true } : {}),
    });
  };
  const start = (): Awaitable<unknown> => {
    const handler = binding.handlers[method];
    if (handler === undefined) throw new RingfenceError("method_not_allowed", `unknown method ${method}`);
    binding.guard();
    // A deadline already past: refused before any work (no Redis, no handler), and counted as the
    // caller's doing, not as a server error (docs/operations.md#metrics).
    if (call.deadlineMs !== undefined && Date.now() >= call.deadlineMs) {
      expiredOnArrival = true;
      throw new RingfenceError("deadline_exceeded", "the call's deadline passed before the call started");
    }
    if (request instanceof UndecodableRequest) {
      throw new RingfenceError(
        "bad_request",
        `the request is not a valid protobuf message: ${request.reason}`,
      );
    }
    const authenticate = binding.authenticatorOf(method);
    if (authenticate === undefined) return handler(request, ctx);
    return andThen(authenticate(ctx, request), (found) => {
      caller = found;
      ctx.caller = found;
      return handler(request, ctx);
    });
  };
  const succeeded = (response: unknown): Outcome => {
    const status = binding.successStatus(method);
    if (status !== undefined) headers[HTTP_STATUS_MARKER] = String(status);
    record({ code: "ok", grpcStatus: 0, httpStatus: status ?? 200 });
    return { ok: true, response, headers };
  };
  const failed = (err: unknown): Outcome => {
    if (err instanceof RingfenceError && err.refusedBy !== undefined) notes.refusedBy ??= err.refusedBy;
    const error = toWire(err, binding.dialectOf(method), deps.docsUrl, call.requestId);
    if (isRedisUnavailable(err)) {
      // An outage, answered 503 and reported by the health watchdog: not a failure of this call.
      deps.log.warn("call failed: redis unavailable", {
        method: `${binding.serviceName}/${method}`,
        request_id: call.requestId,
        error: err instanceof Error ? `${err.name}: ${err.message}` : String(err),
      });
    } else if (!(err instanceof RingfenceError)) {
      deps.log.error("call failed", {
        method: `${binding.serviceName}/${method}`,
        request_id: call.requestId,
        error: err instanceof Error ? `${err.name}: ${err.message}` : String(err),
      });
    }
    record(error);
    // Headers set by the handler before it failed (other than a success status) still apply.
    const { [HTTP_STATUS_MARKER]: _ignored, ...kept } = headers;
    return { ok: false, error, headers: { ...kept, ...error.headers } };
  };
  return settle(start, succeeded, failed);
}

/** The RPC names of each binding's handlers, worked out once. */
const rpcNames = new WeakMap<ServiceBinding, Map<string, string>>();

/** The RPC's name as the proto spells it (`LookupPhoneNumber`) for a handler's (`lookupPhoneNumber`). */
function rpcName(binding: ServiceBinding, method: string): string {
  let names = rpcNames.get(binding);
  if (names === undefined) {
    names = new Map(Object.entries(binding.definition).map(([m, d]) => [m, d.path.split("/")[2] ?? m]));
    rpcNames.set(binding, names);
  }
  return names.get(method) ?? method;
}
