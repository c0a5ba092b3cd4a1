/**
 * The built-in REST gateway's server, and the steps of one request in the order they run: find
 * the route, read and decode the body, run the handler, answer. Routing, decoding, answers and
 * deadlines each have their own module beside this one (docs/gateway.md).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { buildDocument } from "../openapi/document.js";
import { RingfenceError, type ErrorDialect } from "../errors.js";
import { errorMessage, type Logger } from "../log.js";
import { normalizeAddress } from "../net/cidr.js";
import type { Contract } from "../rpc/contract.js";
import { invoke, type InvokeDeps, type ServiceBinding } from "../rpc/binding.js";
import { REQUEST_ID_HEADER, requestIdOf, elapsedMs } from "../observability/calls.js";
import { answer, cleanMessage, closeUnlessRead, send, sendError, sendJson } from "./answer.js";
import { requestDeadline } from "./deadline.js";
import { decodeRequest, firstHeader, readBody } from "./request.js";
import {
  buildRoutes,
  exactRoutes,
  matchRoute,
  pathDialects,
  type Route,
  type RouteMatch,
  type RouteMiss,
} from "./routes.js";

export interface GatewayDeps extends InvokeDeps {
  log: Logger;
  docsUrl: string;
  maxBodyBytes: number;
  /** How long a client may take to send its headers (HTTP_HEADERS_TIMEOUT_MS); default 10 s. */
  headersTimeoutMs?: number | undefined;
  /** How long a client may take to send its whole request (HTTP_REQUEST_TIMEOUT_MS); default 30 s. */
  requestTimeoutMs?: number | undefined;
  contract: Contract;
  /** Whether the service can do its work now (Redis reachable), for `GET /readyz`. */
  ready: () => Promise<boolean>;
}

/** The routes of the served bindings, and the error family of a path none takes: built once, at start. */
interface Routing {
  readonly routes: readonly Route[];
  readonly exact: ReadonlyMap<string, RouteMatch>;
  readonly dialectOfPath: (path: string) => ErrorDialect;
}

/** One request past its health check: what every later step needs of it. */
interface Call {
  readonly deps: GatewayDeps;
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  /** Takes what goes wrong past the call's own error mapping. */
  readonly fail: (err: unknown) => void;
  readonly requestId: string;
  readonly startedAt: bigint;
  readonly deadlineMs: number | undefined;
}

/**
 * How often node:http looks for connections past their header or request timeout (its default,
 * 30 s, let a timeout fire up to 30 s late): a timeout fires at most this much after its setting.
 */
const TIMEOUT_CHECK_MS = 250;
/** Where the built-in gateway serves the OpenAPI document (docs/operations.md#api-document), as JSON. */
export const OPENAPI_PATH = "/openapi.json";

/**
 * The built-in REST gateway: every route comes from the `google.api.http` annotations of the
 * served methods, and each request runs the same in-process handler as its gRPC twin, with the
 * same answer conventions as Envoy's transcoder plus the Lua marker filter.
 */
export function createGateway(bindings: readonly ServiceBinding[], deps: GatewayDeps): Server {
  const routes = buildRoutes(bindings, deps.contract);
  const routing: Routing = { routes, exact: exactRoutes(routes), dialectOfPath: pathDialects(bindings) };
  // The REST surface's OpenAPI document, built once from the same contract and bindings, on first request.
  let document: string | undefined;
  const server = createServer(
    {
      headersTimeout: deps.headersTimeoutMs ?? 10_000,
      requestTimeout: deps.requestTimeoutMs ?? 30_000,
      connectionsCheckingInterval: TIMEOUT_CHECK_MS,
    },
    (req, res) => {
      if (
        req.method === "GET" &&
        (req.url === OPENAPI_PATH || req.url?.startsWith(`${OPENAPI_PATH}?`) === true)
      ) {
        document ??= JSON.stringify(buildDocument(deps.contract, bindings));
        res.setHeader(REQUEST_ID_HEADER, requestIdOf(firstHeader(req, REQUEST_ID_HEADER)));
        send(res, 200, document, "application/json", { "cache-control": "public, max-age=300" });
        return;
      }
      const fail = (err: unknown) => {
        deps.log.error("gateway failure", { error: errorMessage(err) });
        if (!res.headersSent) {
          closeUnlessRead(req, res);
          sendError(res, "session", deps.docsUrl, err, {});
        } else res.destroy();
      };
      try {
        handle(routing, deps, req, res, fail);
      } catch (err) {
        fail(err);
      }
    },
  );
  return server;
}

/**
 * Answers one request. A call its handler answers at once is written at once: no promise between
 * the body's last byte and the answer (docs/benchmark.md#what-a-call-pays-for-on-node-20).
 */
function handle(
  routing: Routing,
  deps: GatewayDeps,
  req: IncomingMessage,
  res: ServerResponse,
  fail: (err: unknown) => void,
): void {
  const rawUrl = req.url ?? "/";
  const q = rawUrl.indexOf("?");
  const rawPath = q < 0 ? rawUrl : rawUrl.slice(0, q);
  const rawQuery = q < 0 ? "" : rawUrl.slice(q + 1);
  const verb = req.method ?? "GET";
  const startedAt = process.hrtime.bigint();
  const deadlineMs = requestDeadline(req);
  const requestId = requestIdOf(firstHeader(req, REQUEST_ID_HEADER));
  res.setHeader(REQUEST_ID_HEADER, requestId);
  if (verb === "GET" && (rawPath === "/healthz" || rawPath === "/readyz")) {
    answerHealth(deps, res, rawPath, fail);
    return;
  }
  const call: Call = { deps, req, res, fail, requestId, startedAt, deadlineMs };
  const match = matchRoute(routing.routes, routing.exact, verb, rawPath);
  if ("error" in match) {
    refuseUnrouted(call, match, rawPath, routing.dialectOfPath);
    return;
  }
  const { route } = match;
  readBody(req, deps.maxBodyBytes, (bodyError, body) => {
    let request: unknown;
    try {
      if (bodyError !== undefined) throw bodyError;
      request = decodeRequest(route, match.vars, rawQuery, body, req.headers["content-type"]);
    } catch (err) {
      refuseBadRequest(call, route, err);
      return;
    }
    run(call, route, request);
  });
}

/** `GET /healthz`: the process answers; `GET /readyz`: it can do its work now. */
function answerHealth(
  deps: GatewayDeps,
  res: ServerResponse,
  path: string,
  fail: (err: unknown) => void,
): void {
  const health = (up: boolean) => {
    sendJson(res, up ? 200 : 503, { status: up ? "ok" : "unavailable" }, {});
  };
  if (path === "/healthz") health(true);
  else
    deps
      .ready()
      .catch(() => false)
      .then(health)
      .catch(fail);
}

/** Refuses a request no route takes, in the family of the route it nearly took, or of its path. */
function refuseUnrouted(
  call: Call,
  miss: RouteMiss,
  path: string,
  dialectOfPath: (path: string) => ErrorDialect,
): void {
  const { route, error } = miss;
  if (route === undefined) refuse(call, undefined, dialectOfPath(path), error, {});
  else refuse(call, route, route.binding.dialectOf(route.method), error, route.binding.headers);
}

/** Refuses a request whose body could not be read or decoded, in its route's family. */
function refuseBadRequest(call: Call, route: Route, err: unknown): void {
  const e = err instanceof RingfenceError ? err : new RingfenceError("bad_request", cleanMessage(err));
  refuse(call, route, route.binding.dialectOf(route.method), e, route.binding.headers);
}

/** A refusal before the call reaches its handler: answered here, observed like any other call. */
function refuse(
  call: Call,
  route: Route | undefined,
  dialect: ErrorDialect,
  err: unknown,
  headers: Readonly<Record<string, string>>,
): void {
  const { deps, req, res, requestId } = call;
  closeUnlessRead(req, res);
  const wire = sendError(res, dialect, deps.docsUrl, err, headers, requestId);
  deps.observe?.({
    transport: "http",
    service: route?.binding.serviceName ?? "-",
    method: route?.definition.path.split("/")[2] ?? "-",
    code: wire.code,
    grpcStatus: wire.grpcStatus,
    httpStatus: wire.httpStatus,
    durationMs: elapsedMs(call.startedAt),
    requestId,
  });
}

/** Runs the route's handler on the decoded request, as its gRPC twin does, and writes its answer. */
function run(call: Call, route: Route, request: unknown): void {
  const { req, res, fail } = call;
  // The built-in gateway is the edge: the socket's peer is the client, whatever it claims.
  const client =
    req.socket.remoteAddress === undefined ? undefined : normalizeAddress(req.socket.remoteAddress);
  const received = {
    transport: "http" as const,
    header: (name: string) => firstHeader(req, name),
    clientAddress: client,
    requestId: call.requestId,
    startedAt: call.startedAt,
    deadlineMs: call.deadlineMs,
  };
  try {
    const outcome = invoke(route.binding, route.method, request, received, call.deps);
    if (outcome instanceof Promise)
      outcome
        .then((done) => {
          answer(res, route, done);
        })
        .catch(fail);
    else answer(res, route, outcome);
  } catch (err) {
    fail(err);
  }
}
