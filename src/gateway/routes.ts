/**
 * Routing of the built-in gateway: the routes the `google.api.http` annotations declare, and
 * which of them a request's verb and path take (docs/gateway.md#routes).
 */
import type { MethodDefinition } from "@grpc/grpc-js";
import type { DescField, DescMessage } from "@bufbuild/protobuf";
import { httpBodyField, sameShape } from "./direct.js";
import { clip, RingfenceError, type ErrorDialect } from "../errors.js";
import type { Contract } from "../rpc/contract.js";
import type { ServiceBinding } from "../rpc/binding.js";
import { BadPathEncoding, matchTemplate, parseTemplate, type PathTemplate } from "./path-template.js";

/** One `google.api.http` rule of a served method, ready to match and to transcode. */
export interface Route {
  verb: string;
  template: PathTemplate;
  body: string;
  responseBody: string;
  binding: ServiceBinding;
  method: string;
  definition: MethodDefinition<unknown, unknown>;
  input: DescMessage;
  output: DescMessage;
  /** The google.api.HttpBody field the body fills, when it is one (a shortcut: docs/gateway.md). */
  httpBody: DescField | undefined;
  /** Whether the handler's answer is turned into JSON with no binary trip (a shortcut: docs/gateway.md). */
  directAnswer: boolean;
}

/** The route a request takes, with the path variables its template read. */
export interface RouteMatch {
  route: Route;
  vars: ReadonlyMap<string, string>;
}

/** Why no route takes a request, and the route whose error family the refusal takes, if one. */
export interface RouteMiss {
  route: Route | undefined;
  error: RingfenceError;
}

export const HTTP_BODY_TYPE = "google.api.HttpBody";

/** The path variables of a plain path: none, shared by every request to one. */
const NO_VARS: ReadonlyMap<string, string> = new Map();

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
export function exactRoutes(routes: readonly Route[]): Map<string, RouteMatch> {
  const exact = new Map<string, RouteMatch>();
  routes.forEach((route, i) => {
    const { template } = route;
    if (template.variables.length > 0 || template.verb !== undefined) return;
    const path = template.source;
    const earlier = routes.slice(0, i).some((r) => r.verb === route.verb && safeMatch(r.template, path));
    if (!earlier) exact.set(`${route.verb} ${path}`, { route, vars: NO_VARS });
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
 * The route that `verb` and the raw `path` take: the first whose template matches, or why none
 * does (docs/gateway.md#unknown-routes-and-methods). A badly encoded path variable is refused in
 * the family of the route it would have taken; a path other verbs take answers with `Allow`.
 */
export function matchRoute(
  routes: readonly Route[],
  exact: ReadonlyMap<string, RouteMatch>,
  verb: string,
  path: string,
): RouteMatch | RouteMiss {
  const hit = exact.get(`${verb} ${path}`);
  if (hit !== undefined) return hit;
  let found: RouteMatch | undefined;
  let badEncoding: RouteMiss | undefined;
  const allowed = new Set<string>();
  for (const r of routes) {
    let m: Map<string, string> | undefined;
    try {
      m = matchTemplate(r.template, path);
    } catch (err) {
      if (!(err instanceof BadPathEncoding)) throw err;
      allowed.add(r.verb);
      if (r.verb === verb)
        badEncoding ??= { route: r, error: new RingfenceError("bad_request", err.message) };
      continue;
    }
    if (m === undefined) continue;
    allowed.add(r.verb);
    if (r.verb === verb && found === undefined) found = { route: r, vars: m };
  }
  if (found !== undefined) return found;
  if (badEncoding !== undefined) return badEncoding;
  const error =
    allowed.size > 0
      ? new RingfenceError("method_not_allowed", `${verb} is not allowed on ${clip(path)}`, {
          allow: [...allowed].join(", "),
        })
      : new RingfenceError("not_found", `no such path: ${clip(path)}`);
  return { route: undefined, error };
}

/**
 * The error family of a path no route matched (docs/gateway.md#unknown-routes-and-methods), built
 * once from the bindings served: V1 paths (but `/v1/session/`, `/v1/delivery/` and `/v1/whatsapp/`) take the V1
 * body, the areas the bindings declare as V2 (`/v2/<area>` and below) the V2 body, everything else
 * the session body.
 */
export function pathDialects(
  bindings: readonly Pick<ServiceBinding, "v2Areas">[],
): (path: string) => ErrorDialect {
  const areas = [...new Set(bindings.flatMap((b) => b.v2Areas))];
  const odd = areas.find((a) => !/^[a-z][a-z0-9_-]*$/.test(a));
  if (odd !== undefined) throw new Error(`V2 area ${JSON.stringify(odd)} is not one plain path segment`);
  const v2 = areas.length === 0 ? undefined : new RegExp(`^/v2/(${areas.join("|")})(/|$)`);
  return (path) => {
    if (/^\/v1\/(?!session\/|delivery\/|whatsapp\/)/.test(path)) return "v1";
    if (v2?.test(path) === true) return "v2";
    return "session";
  };
}
