import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { buildDocument } from "../openapi/document.js";
import type { MethodDefinition } from "@grpc/grpc-js";
import {
  fromBinary,
  fromJson,
  ScalarType,
  toBinary,
  toJson,
  type DescField,
  type DescMessage,
  type JsonValue,
  type Message,
} from "@bufbuild/protobuf";
import { asMessage, httpBodyField, httpBodyRequest, sameShape } from "./direct.js";
import { clip, quote, RingfenceError, toWire, type ErrorDialect, type WireError } from "../errors.js";
import { errorMessage, type Logger } from "../log.js";
import { normalizeAddress } from "../net/cidr.js";
import type { Contract } from "../rpc/contract.js";
import {
  HTTP_BODY_MARKER,
  HTTP_STATUS_MARKER,
  invoke,
  type InvokeDeps,
  type Outcome,
  type ServiceBinding,
} from "../rpc/binding.js";
import { REQUEST_ID_HEADER, requestIdOf, elapsedMs } from "../observability/calls.js";
import { BadPathEncoding, matchTemplate, parseTemplate, type PathTemplate } from "./path-template.js";

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

interface Route {
  verb: string;
  template: PathTemplate;
  body: string;
  responseBody: string;
  binding: ServiceBinding;
  method: string;
  definition: MethodDefinition<unknown, unknown>;
  input: DescMessage;
  output: DescMessage;
  /** The google.api.HttpBody field the body fills, when it is one (src/gateway/direct.ts). */
  httpBody: DescField | undefined;
  /** Whether the handler's answer is turned into JSON with no binary trip (src/gateway/direct.ts). */
  directAnswer: boolean;
}

const HTTP_BODY_TYPE = "google.api.HttpBody";
/**
 * How often node:http looks for connections past their header or request timeout (its default,
 * 30 s, let a timeout fire up to 30 s late): a timeout fires at most this much after its setting.
 */
const TIMEOUT_CHECK_MS = 250;
/** Where the built-in gateway serves the OpenAPI document (openapi/ringfence.yaml, as JSON). */
export const OPENAPI_PATH = "/openapi.json";

/**
 * The built-in REST gateway: every route comes from the `google.api.http` annotations of the
 * served methods, and each request runs the same in-process handler as its gRPC twin, with the
 * same answer conventions as Envoy's transcoder plus the Lua marker filter.
 */
export function createGateway(bindings: readonly ServiceBinding[], deps: GatewayDeps): Server {
  const routes = buildRoutes(bindings, deps.contract);
  const exact = exactRoutes(routes);
  // The REST surface's OpenAPI document, built once from the same contract, on first request.
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
        document ??= JSON.stringify(buildDocument(deps.contract));
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
        handle(routes, exact, deps, req, res, fail);
      } catch (err) {
        fail(err);
      }
    },
  );
  return server;
}

export function buildRoutes(bindings: readonly ServiceBinding[], contract: Contract): Route[] {
  const routes: Route[] = [];
  for (const binding of bindings) {
    for (const [method, definition] of Object.entries(binding.definition)) {
      const rpc = contract.methods.get(definition.path);
      if (rpc === undefined)
        throw new Error(`${definition.path} is not in the descriptor: run npm run generate`);
      for (const http of rpc.http) {
        routes.push({
          verb: http.verb,
          template: parseTemplate(http.pattern),
          body: http.body,
          responseBody: http.responseBody,
          binding,
          method,
          definition: definition as MethodDefinition<unknown, unknown>,
          input: rpc.input,
          output: rpc.output,
          httpBody: httpBodyField(rpc.input, http.body),
          directAnswer: sameShape(rpc.output),
        });
      }
    }
  }
  return routes;
}

/**
 * Routes whose template is a plain path (no variable, no custom verb), by `<verb> <path>`: a
 * request to exactly that path is theirs without trying every template. Only a route that no
 * earlier route of its verb also matches, so the answer is the one the scan gives.
 */
function exactRoutes(routes: readonly Route[]): Map<string, Route> {
  const exact = new Map<string, Route>();
  routes.forEach((route, i) => {
    const { template } = route;
    if (template.variables.length > 0 || template.verb !== undefined) return;
    const path = template.source;
    const earlier = routes.slice(0, i).some((r) => r.verb === route.verb && safeMatch(r.template, path));
    if (!earlier) exact.set(`${route.verb} ${path}`, route);
  });
  return exact;
}

function safeMatch(template: PathTemplate, path: string): boolean {
  try {
    return matchTemplate(template, path) !== undefined;
  } catch {
    return false;
  }
}

/**
 * Answers one request; `fail` takes what goes wrong past the call's own error mapping. A call
 * its handler answers at once is written at once: no promise between the body's last byte and
 * the answer (src/awaitable.ts).
 */
function handle(
  routes: Route[],
  exact: ReadonlyMap<string, Route>,
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
  const deadlineMs = deadlineOf(firstHeader(req, "grpc-timeout"), Date.now());
  const requestId = requestIdOf(firstHeader(req, REQUEST_ID_HEADER));
  res.setHeader(REQUEST_ID_HEADER, requestId);
  // A refusal before the call reaches its handler: answered here, observed like any other call.
  const refuse = (
    route: Route | undefined,
    dialect: ErrorDialect,
    err: unknown,
    headers: Readonly<Record<string, string>>,
  ) => {
    closeUnlessRead(req, res);
    const wire = sendError(res, dialect, deps.docsUrl, err, headers, requestId);
    deps.observe?.({
      transport: "http",
      service: route?.binding.serviceName ?? "-",
      method: route?.definition.path.split("/")[2] ?? "-",
      code: wire.code,
      grpcStatus: wire.grpcStatus,
      httpStatus: wire.httpStatus,
      durationMs: elapsedMs(startedAt),
      requestId,
    });
  };

  if (verb === "GET" && (rawPath === "/healthz" || rawPath === "/readyz")) {
    const health = (up: boolean) => {
      sendJson(res, up ? 200 : 503, { status: up ? "ok" : "unavailable" }, {});
    };
    if (rawPath === "/healthz") health(true);
    else
      deps
        .ready()
        .catch(() => false)
        .then(health)
        .catch(fail);
    return;
  }

  const guessDialect = dialectOfPath(rawPath);
  let route = exact.get(`${verb} ${rawPath}`);
  let vars: Map<string, string> | undefined = route === undefined ? undefined : new Map();
  let badEncoding: { route: Route; message: string } | undefined;
  const allowed = new Set<string>();
  for (const r of route === undefined ? routes : []) {
    let m: Map<string, string> | undefined;
    try {
      m = matchTemplate(r.template, rawPath);
    } catch (err) {
      if (!(err instanceof BadPathEncoding)) throw err;
      allowed.add(r.verb);
      if (r.verb === verb) badEncoding ??= { route: r, message: err.message };
      continue;
    }
    if (m === undefined) continue;
    allowed.add(r.verb);
    if (r.verb === verb && route === undefined) {
      route = r;
      vars = m;
    }
  }
  if (route === undefined && badEncoding !== undefined) {
    const { binding } = badEncoding.route;
    refuse(
      badEncoding.route,
      binding.dialectOf(badEncoding.route.method),
      new RingfenceError("bad_request", badEncoding.message),
      binding.headers,
    );
    return;
  }
  if (route === undefined || vars === undefined) {
    const err =
      allowed.size > 0
        ? new RingfenceError("method_not_allowed", `${verb} is not allowed on ${clip(rawPath)}`, {
            allow: [...allowed].join(", "),
          })
        : new RingfenceError("not_found", `no such path: ${clip(rawPath)}`);
    refuse(undefined, guessDialect, err, {});
    return;
  }

  const found = route;
  const { binding } = found;
  const refuseBadRequest = (err: unknown) => {
    const e = err instanceof RingfenceError ? err : new RingfenceError("bad_request", cleanMessage(err));
    refuse(found, binding.dialectOf(found.method), e, binding.headers);
  };
  const respond = (outcome: Outcome) => {
    answer(res, found, outcome);
  };
  readBody(req, deps.maxBodyBytes, (bodyError, body) => {
    let request: unknown;
    try {
      if (bodyError !== undefined) throw bodyError;
      const query = parseQuery(rawQuery);
      const contentType = req.headers["content-type"];
      let bytes: Uint8Array;
      if (found.httpBody !== undefined && vars.size === 0 && query.length === 0) {
        // The body alone makes the request: straight to its binary form, no JSON in between.
        bytes = httpBodyRequest(found.httpBody, contentType ?? "", body);
      } else {
        const json = requestJson(found, vars, query, body, contentType);
        bytes = toBinary(found.input, decodeJson(found.input, json));
      }
      request = found.definition.requestDeserialize(
        Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength),
      );
    } catch (err) {
      refuseBadRequest(err);
      return;
    }
    // The built-in gateway is the edge: the socket's peer is the client, whatever it claims.
    const client =
      req.socket.remoteAddress === undefined ? undefined : normalizeAddress(req.socket.remoteAddress);
    const received = {
      transport: "http" as const,
      header: (name: string) => firstHeader(req, name),
      clientAddress: client,
      requestId,
      startedAt,
      deadlineMs,
    };
    try {
      const outcome = invoke(binding, found.method, request, received, deps);
      if (outcome instanceof Promise) outcome.then(respond).catch(fail);
      else respond(outcome);
    } catch (err) {
      fail(err);
    }
  });
}

/** Writes the call's answer: its error, its HttpBody as it is, or its proto3 JSON. */
function answer(res: ServerResponse, route: Route, outcome: Outcome): void {
  if (!outcome.ok) {
    const { error } = outcome;
    send(res, error.httpStatus, JSON.stringify(error.body), "application/json", outcome.headers);
    return;
  }
  const { [HTTP_STATUS_MARKER]: status = "200", [HTTP_BODY_MARKER]: _unused, ...headers } = outcome.headers;
  const code = Number(status);
  if (route.output.typeName === HTTP_BODY_TYPE) {
    // The handler's google.api.HttpBody as it is: its bytes need no trip through proto3 JSON.
    const raw = outcome.response as { contentType?: string; data?: Uint8Array };
    send(
      res,
      code,
      raw.data === undefined
        ? Buffer.alloc(0)
        : Buffer.from(raw.data.buffer, raw.data.byteOffset, raw.data.byteLength),
      raw.contentType !== undefined && raw.contentType !== "" ? raw.contentType : "application/octet-stream",
      headers,
    );
    return;
  }
  const message = route.directAnswer
    ? (asMessage(route.output, outcome.response as object) as unknown as Message)
    : fromBinary(route.output, route.definition.responseSerialize(outcome.response));
  let json = toJson(route.output, message, { useProtoFieldName: true, alwaysEmitImplicit: true });
  if (route.responseBody !== "" && json !== null && typeof json === "object" && !Array.isArray(json)) {
    json = json[route.responseBody] ?? null;
  }
  if (code === 204) send(res, code, "", undefined, headers);
  else send(res, code, JSON.stringify(json), "application/json", headers);
}

/** Builds the proto3 JSON of the request from body, path variables and query, like the transcoder. */
function requestJson(
  route: Route,
  vars: Map<string, string>,
  query: [string, string][],
  body: Buffer,
  contentType: string | undefined,
): JsonValue {
  const json: Record<string, JsonValue> = {};
  if (route.body === "*") {
    Object.assign(json, bodyValue(route.input, body, contentType));
  } else if (route.body !== "") {
    const field = route.input.fields.find((f) => f.name === route.body);
    const value = bodyValue(field?.message, body, contentType);
    json[route.body] = value;
  }
  for (const [path, value] of vars) setPath(json, route.input, path, [value], true);
  const bound = new Set([...vars.keys(), route.body]);
  const grouped = new Map<string, string[]>();
  for (const [k, v] of query) grouped.set(k, [...(grouped.get(k) ?? []), v]);
  for (const [key, values] of grouped) {
    // With body "*" every field comes from the body, so any query parameter is unknown.
    if (route.body === "*") throw new RingfenceError("bad_request", `unknown query parameter: ${clip(key)}`);
    if (bound.has(key)) continue;
    setPath(json, route.input, key, values, false);
  }
  return json;
}

function bodyValue(desc: DescMessage | undefined, body: Buffer, contentType: string | undefined) {
  if (desc?.typeName === HTTP_BODY_TYPE) {
    return { content_type: contentType ?? "", data: body.toString("base64") };
  }
  if (body.length === 0) return {};
  const type = (contentType ?? "application/json").split(";")[0]?.trim().toLowerCase() ?? "";
  if (type !== "application/json" && !type.endsWith("+json")) {
    throw new RingfenceError("unsupported_media_type", `Content-Type must be application/json, got ${type}`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString("utf8"));
  } catch (err) {
    throw new RingfenceError("bad_request", `malformed JSON body: ${cleanMessage(err)}`);
  }
  if (desc !== undefined && (parsed === null || typeof parsed !== "object" || Array.isArray(parsed))) {
    throw new RingfenceError("bad_request", "the JSON body must be an object");
  }
  return parsed as JsonValue;
}

/** Sets `a.b.c` in the JSON from string values, typed by the field the path names. */
function setPath(
  json: Record<string, JsonValue>,
  input: DescMessage,
  path: string,
  values: string[],
  fromPath: boolean,
): void {
  const names = path.split(".");
  let desc: DescMessage = input;
  let target = json;
  for (const [i, name] of names.entries()) {
    const field: DescField | undefined = desc.fields.find((f) => f.name === name || f.jsonName === name);
    if (field === undefined) {
      throw new RingfenceError(
        "bad_request",
        `unknown ${fromPath ? "path variable" : "query parameter"}: ${clip(path)}`,
      );
    }
    if (i < names.length - 1) {
      if (field.fieldKind !== "message")
        throw new RingfenceError("bad_request", `${path} is not a nested field`);
      const next = target[field.name];
      const child: Record<string, JsonValue> =
        next !== null && typeof next === "object" && !Array.isArray(next) ? next : {};
      target[field.name] = child;
      target = child;
      desc = field.message;
      continue;
    }
    const scalar =
      field.fieldKind === "scalar" || (field.fieldKind === "list" && field.listKind === "scalar")
        ? field.scalar
        : undefined;
    const enumLike = field.fieldKind === "enum" || (field.fieldKind === "list" && field.listKind === "enum");
    if (scalar === undefined && !enumLike) {
      throw new RingfenceError("bad_request", `${path} cannot be set from the URL`);
    }
    const typed = values.map((v) => queryValue(v, scalar, enumLike));
    if (field.fieldKind === "list") target[field.name] = typed;
    else if (typed.length > 1) throw new RingfenceError("bad_request", `${path} may be given only once`);
    else target[field.name] = typed[0] ?? null;
  }
}

const TRUE = new Set(["true", "t", "1", "yes", "y"]);
const FALSE = new Set(["false", "f", "0", "no", "n"]);

/** A query string value as the transcoder's converter reads it: bool spellings, enums by number. */
function queryValue(v: string, scalar: ScalarType | undefined, enumLike: boolean): JsonValue {
  if (scalar === ScalarType.BOOL) {
    const lower = v.toLowerCase();
    if (TRUE.has(lower)) return true;
    if (FALSE.has(lower)) return false;
  }
  if (enumLike && /^-?\d+$/.test(v)) return Number(v);
  return v;
}

/**
 * Strict proto3 JSON decoding. On failure, each top-level field is tried alone to name the one
 * at fault, since the decoder's own message may name only a nested type.
 */
function decodeJson(desc: DescMessage, json: JsonValue) {
  try {
    return fromJson(desc, json, { ignoreUnknownFields: false });
  } catch (err) {
    if (json === null || typeof json !== "object" || Array.isArray(json)) throw err;
    for (const [key, value] of Object.entries(json)) {
      try {
        fromJson(desc, { [key]: value }, { ignoreUnknownFields: false });
      } catch (fieldErr) {
        const raw = fieldErr instanceof Error ? fieldErr.message : String(fieldErr);
        const named = raw.includes(`"${key}"`) || raw.includes(`.${key} `);
        throw new RingfenceError(
          "bad_request",
          named ? cleanMessage(fieldErr) : `invalid value for field ${quote(key)}: ${raw}`,
        );
      }
    }
    throw err;
  }
}

/** Query strings as the transcoder reads them: percent-decoded, `+` kept as `+`. */
function parseQuery(raw: string): [string, string][] {
  if (raw === "") return [];
  return raw
    .split("&")
    .filter((p) => p !== "")
    .map((pair) => {
      const eq = pair.indexOf("=");
      const [k, v] = eq < 0 ? [pair, ""] : [pair.slice(0, eq), pair.slice(eq + 1)];
      try {
        return [decodeURIComponent(k), decodeURIComponent(v)];
      } catch {
        throw new RingfenceError("bad_request", `malformed percent-encoding in query parameter ${quote(k)}`);
      }
    });
}

/**
 * The request's body, up to `limit` bytes, to `done`. Past it (declared or while reading) `done`
 * is told at once and the rest is left unread: the refusal closes the connection
 * (`closeUnlessRead`). `done` is called once.
 */
function readBody(
  req: IncomingMessage,
  limit: number,
  done: (err: Error | undefined, body: Buffer) => void,
): void {
  const tooLarge = () => new RingfenceError("payload_too_large", `the body may not exceed ${limit} bytes`);
  let told = false;
  const tell = (err: Error | undefined, body: Buffer) => {
    if (told) return;
    told = true;
    done(err, body);
  };
  const declared = Number(req.headers["content-length"] ?? "0");
  if (declared > limit) {
    tell(tooLarge(), EMPTY);
    return;
  }
  const chunks: Buffer[] = [];
  let size = 0;
  req.on("data", (chunk: Buffer) => {
    size += chunk.length;
    if (size > limit) {
      req.removeAllListeners("data");
      req.pause();
      tell(tooLarge(), EMPTY);
      return;
    }
    chunks.push(chunk);
  });
  req.on("end", () => {
    tell(undefined, chunks.length === 1 ? (chunks[0] ?? EMPTY) : Buffer.concat(chunks));
  });
  req.on("error", (err) => {
    tell(err, EMPTY);
  });
}

const EMPTY = Buffer.alloc(0);

/**
 * For an answer given before the request's body was read to its end (too large, unreadable, a
 * path no route takes): `Connection: close`, and the socket is destroyed as soon as the answer is
 * handed to the kernel, so the rest of the body is never read nor waited for. A request whose
 * body was read, or that has none, keeps its connection.
 */
function closeUnlessRead(req: IncomingMessage, res: ServerResponse): void {
  const declaresBody =
    req.headers["transfer-encoding"] !== undefined ||
    (req.headers["content-length"] !== undefined && req.headers["content-length"] !== "0");
  if (req.complete || !declaresBody) return;
  res.setHeader("connection", "close");
  req.pause();
  res.once("finish", () => {
    req.socket.destroy();
  });
}

function cleanMessage(err: unknown): string {
  const msg = err instanceof Error ? err.message : String(err);
  return msg.replace(/^cannot decode message [\w.]+ from JSON: /, "");
}

function sendError(
  res: ServerResponse,
  dialect: ErrorDialect,
  docsUrl: string,
  err: unknown,
  headers: Readonly<Record<string, string>>,
  requestId = "",
): WireError {
  const wire = toWire(err, dialect, docsUrl, requestId);
  send(res, wire.httpStatus, JSON.stringify(wire.body), "application/json", { ...headers, ...wire.headers });
  return wire;
}

function firstHeader(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string>): void {
  send(res, status, JSON.stringify(body), "application/json", headers);
}

function send(
  res: ServerResponse,
  status: number,
  body: string | Buffer,
  contentType: string | undefined,
  headers: Readonly<Record<string, string>>,
): void {
  for (const [k, v] of Object.entries(headers)) res.setHeader(k, v);
  if (contentType !== undefined) res.setHeader("content-type", contentType);
  res.statusCode = status;
  res.end(body);
}

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

/**
 * The error family of a path no route matched (docs/gateway.md#unknown-routes-and-methods): V1 paths take
 * the V1 body, the V2 verify, lookup, insights and fraud paths the V2 body, everything else the session body.
 */
export function dialectOfPath(path: string): ErrorDialect {
  if (/^\/v1\/(?!session\/)/.test(path)) return "v1";
  if (/^\/v2\/(verification|lookup|insights|fraud)(\/|$)/.test(path)) return "v2";
  return "session";
}
