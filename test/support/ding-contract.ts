import { readFileSync } from "node:fs";

/**
 * The original API's SDK models (test/fixtures/ding-sdk/models.json, written by hand from the
 * ding-live SDK sources) as a checker of V1 answers: what the SDKs would accept, and the
 * statuses of decisions section 4 (revised).
 */

interface Schema {
  type?: "object" | "string" | "integer" | "number" | "boolean" | "array";
  properties?: Record<string, Schema>;
  required?: string[];
  additionalProperties?: boolean;
  enum?: string[];
  format?: "date-time";
  items?: Schema;
  $ref?: string;
  oneOf?: Schema[];
  discriminator?: { propertyName: string; mapping: Record<string, string> };
}

interface Operation {
  name: string;
  method: string;
  path: string;
  headers: string[];
  request?: string;
  response: string;
}

interface Models {
  sdks: { repository: string; package: string; version: string; commit: string }[];
  operations: Operation[];
  errors: { status: number; model: string };
  $defs: Record<string, Schema>;
}

export const MODELS = JSON.parse(
  readFileSync(new URL("../fixtures/ding-sdk/models.json", import.meta.url), "utf8"),
) as Models;

export type OperationName =
  "lookup" | "createAuthentication" | "check" | "retry" | "getAuthenticationStatus" | "feedback";

export function model(name: string): Schema {
  const s = MODELS.$defs[name];
  if (s === undefined) throw new Error(`no model ${name}`);
  return s;
}

/** The values of a model's enum property (for tests that name every value of a list). */
export function enumOf(modelName: string, property?: string): string[] {
  let s = model(modelName);
  if (property !== undefined) s = resolve(s.properties?.[property] ?? {});
  return [...(s.enum ?? [])];
}

/** The SDKs' error codes; every one but internal_server_error answers 400 (decisions section 4). */
export const SDK_ERROR_CODES = enumOf(MODELS.errors.model, "code");
export const CODES_ANSWERED_400 = SDK_ERROR_CODES.filter((c) => c !== "internal_server_error");

function resolve(s: Schema): Schema {
  if (s.$ref === undefined) return s;
  return model(s.$ref.replace("#/$defs/", ""));
}

const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

/** Where `value` breaks `schema`, as `path: problem` lines (empty when it conforms). */
export function validate(schema: Schema, value: unknown, path = "$"): string[] {
  const s = resolve(schema);
  if (s.oneOf !== undefined) {
    const d = s.discriminator;
    if (d === undefined) throw new Error("oneOf without a discriminator");
    const tag = (value as Record<string, unknown> | null)?.[d.propertyName];
    const ref = typeof tag === "string" ? d.mapping[tag] : undefined;
    if (ref === undefined) return [`${path}.${d.propertyName}: ${JSON.stringify(tag)} names no variant`];
    return validate({ $ref: ref }, value, path);
  }
  if (value === null) return [`${path}: null (an absent value must be left out)`];
  switch (s.type) {
    case "object": {
      if (typeof value !== "object" || Array.isArray(value)) return [`${path}: not an object`];
      const out: string[] = [];
      const obj = value as Record<string, unknown>;
      for (const [k, v] of Object.entries(obj)) {
        const p = s.properties?.[k];
        if (p === undefined) {
          if (s.additionalProperties === false) out.push(`${path}.${k}: not in the model`);
          continue;
        }
        out.push(...validate(p, v, `${path}.${k}`));
      }
      for (const k of s.required ?? []) if (!(k in obj)) out.push(`${path}.${k}: required`);
      return out;
    }
    case "array":
      if (!Array.isArray(value)) return [`${path}: not an array`];
      return value.flatMap((v, i) => validate(s.items ?? {}, v, `${path}[${i}]`));
    case "string": {
      if (typeof value !== "string") return [`${path}: not a string`];
      if (s.enum !== undefined && !s.enum.includes(value))
        return [`${path}: ${JSON.stringify(value)} not in enum`];
      if (s.format === "date-time" && !(RFC3339.test(value) && !Number.isNaN(Date.parse(value)))) {
        return [`${path}: ${JSON.stringify(value)} is not an RFC 3339 date-time`];
      }
      return [];
    }
    case "integer":
      return Number.isInteger(value) ? [] : [`${path}: not an integer`];
    case "number":
      return typeof value === "number" && Number.isFinite(value) ? [] : [`${path}: not a number`];
    case "boolean":
      return typeof value === "boolean" ? [] : [`${path}: not a boolean`];
    default:
      return [];
  }
}

/** The SDK operation a V1 request is, or undefined (another path, another method). */
export function operationOf(method: string, path: string): Operation | undefined {
  return MODELS.operations.find(
    (op) =>
      op.method === method.toUpperCase() &&
      new RegExp(`^${op.path.replace(/\{[^}]+\}/g, "[^/]+")}$`).test(path) &&
      // /v1/authentication/feedback is its own operation, not a read-back of "feedback".
      !(op.name === "getAuthenticationStatus" && path === "/v1/authentication/feedback"),
  );
}

/** A V1 path (the session service under /v1/session, delivery reports under /v1/delivery and the WhatsApp webhook under /v1/whatsapp are not V1). */
export function isV1Path(path: string): boolean {
  return /^\/v1\/(?!(session|delivery|whatsapp)(\/|$))/.test(path);
}

export interface V1Answer {
  via: "rest" | "grpc";
  method: string;
  path: string;
  status: number;
  headers: Record<string, string>;
  body: unknown;
}

/** What an original SDK, or decisions section 4, would object to in one V1 answer. */
export function answerViolations(a: V1Answer): string[] {
  const op = operationOf(a.method, a.path);
  const where = `${a.via} ${a.method} ${a.path} ${a.status}`;
  const out = (problems: string[]) => problems.map((p) => `${where}: ${p}`);
  if (a.status === 200) {
    if (op === undefined) return out(["200 on a path that is no SDK operation"]);
    return out(validate(model(op.response), a.body));
  }
  if (a.status === MODELS.errors.status) {
    const problems = validate(model(MODELS.errors.model), a.body);
    const code = (a.body as { code?: unknown } | null)?.code;
    if (typeof code !== "string") problems.push("$.code: missing");
    else if (!CODES_ANSWERED_400.includes(code)) problems.push(`$.code: ${code} must not answer 400`);
    return out(problems);
  }
  // Any other status: a plain HTTP error to the SDKs, which must not carry a code of their 400 list.
  const body = a.body as Record<string, unknown> | null;
  const problems: string[] = [];
  if (body === null || typeof body !== "object") problems.push("not a V1 error body");
  else {
    for (const k of ["code", "message", "doc_url"]) {
      if (typeof body[k] !== "string") problems.push(`$.${k}: not a string`);
    }
    if (CODES_ANSWERED_400.includes(String(body.code)))
      problems.push(`$.code: ${String(body.code)} must answer 400`);
  }
  if (a.status === 503 && a.headers["retry-after"] === undefined) problems.push("503 without Retry-After");
  return out(problems);
}

/** Every V1 answer the test run saw, and what was wrong with them. */
export const observed: V1Answer[] = [];
export const violations: { test: string; problem: string }[] = [];

export function recordAnswer(answer: V1Answer, test = currentTest): void {
  observed.push(answer);
  for (const problem of answerViolations(answer)) violations.push({ test, problem });
}

let currentTest = "";
export function setCurrentTest(title: string): void {
  currentTest = title;
}

/** Origins of the service's gateways (test apps, service processes) whose V1 answers are checked. */
const watched = new Set<string>();

/** Checks the V1 answers of the gateway at `baseUrl` from now on; returns `baseUrl`. */
export function watchV1Answers(baseUrl: string): string {
  watched.add(new URL(baseUrl).origin);
  return baseUrl;
}

/**
 * Wraps `fetch` so that every V1 answer any test receives from the service's gateway is checked
 * against the SDK models, whatever the test itself asserts.
 */
export function installFetchRecorder(): void {
  const original = globalThis.fetch;
  globalThis.fetch = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const res = await original(input, init);
    const request = input instanceof Request ? input : undefined;
    const url = new URL(input instanceof Request ? input.url : input);
    const method = (init?.method ?? request?.method ?? "GET").toUpperCase();
    if (!watched.has(url.origin) || !isV1Path(url.pathname)) return res;
    if (method === "HEAD" || method === "OPTIONS") return res;
    const test = currentTest;
    const text = await res
      .clone()
      .text()
      .catch(() => undefined);
    if (text === undefined) return res;
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      body = undefined;
    }
    recordAnswer(
      {
        via: "rest",
        method,
        path: url.pathname,
        status: res.status,
        headers: Object.fromEntries(res.headers),
        body,
      },
      test,
    );
    return res;
  };
}
