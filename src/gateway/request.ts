/**
 * Reading a REST request as the transcoder does: its body within the size limit, then path
 * variables, query and body made into the method's request message (docs/gateway.md#request-mapping).
 */
import type { IncomingMessage } from "node:http";
import {
  fromJson,
  ScalarType,
  toBinary,
  type DescField,
  type DescMessage,
  type JsonValue,
} from "@bufbuild/protobuf";
import { httpBodyRequest } from "./direct.js";
import { clip, quote, RingfenceError } from "../errors.js";
import { cleanMessage } from "./answer.js";
import { HTTP_BODY_TYPE, type Route } from "./routes.js";

/**
 * The request message `route`'s handler takes, from the path variables, the query and the body;
 * throws what the caller gets as a refusal.
 */
export function decodeRequest(
  route: Route,
  vars: ReadonlyMap<string, string>,
  rawQuery: string,
  body: Buffer,
  contentType: string | undefined,
): unknown {
  const query = parseQuery(rawQuery);
  let bytes: Uint8Array;
  if (route.httpBody !== undefined && vars.size === 0 && query.length === 0) {
    // The body alone makes the request: straight to its binary form, no JSON in between.
    bytes = httpBodyRequest(route.httpBody, contentType ?? "", body);
  } else {
    const json = requestJson(route, vars, query, body, contentType);
    bytes = toBinary(route.input, decodeJson(route.input, json));
  }
  return route.definition.requestDeserialize(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
}

/** Builds the proto3 JSON of the request from body, path variables and query, like the transcoder. */
function requestJson(
  route: Route,
  vars: ReadonlyMap<string, string>,
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
 * at fault (the error's `field`, as the caller wrote it), since the decoder's own message may name
 * only a nested type.
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
          {},
          { field: key },
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
 * The request's body, up to `limit` bytes, to `done` (docs/gateway.md#body-limits). Past it
 * (declared or while reading) `done` is told at once and the rest is left unread: the refusal
 * closes the connection (`closeUnlessRead`). `done` is called once.
 */
export function readBody(
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

/** A request header's value, the first when it came more than once. */
export function firstHeader(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}
